//! Axis-1 reductions in the row layout: the rows stay in registers and their broadcast back over
//! the columns moves nothing; compiled with NVRTC where rows fit in a warp and where they span
//! several.
use super::super::emit_cuda;
use crate::tests::ok;

const SOFTMAX_ROWS: &str = "fn softmax_rows<const ROWS: usize, const BLOCK: usize>(
    x: *const f32, out: *mut f32, n_rows: i32, n_cols: i32) {
    let rows = program_id(0) * ROWS + arange(0, ROWS);
    let cols = arange(0, BLOCK);
    let offs = rows.expand_dims(1) * n_cols + cols.expand_dims(0);
    let mask = (rows < n_rows).expand_dims(1) & (cols < n_cols).expand_dims(0);
    let v = load(x + offs, mask, f32::NEG_INFINITY);
    let m = v.max(1);
    let e = exp(v - m.expand_dims(1));
    let s = e.sum(1);
    store(out + offs, e / s.expand_dims(1), mask);
}";

#[test]
fn row_reductions_broadcast_back_without_shared_memory() {
    let src = emit_cuda(&ok(SOFTMAX_ROWS)).source;
    assert!(src.contains("__shfl_xor_sync(0xffffffffu, fuse_rv[fuse_j], fuse_s)"), "{src}");
    assert!(src.contains("each thread holds what its slots need"), "{src}");
    // Row and column indices, masks and row values all broadcast without the scratch.
    assert!(!src.contains("broadcast(") || !src.contains("through shared memory"), "{src}");
}

/// Rows within a warp (`C / VEC <= 32`), across warps, wider than the block (one row spanning
/// several chunks) and narrower than a vector, each with the launch facts off and on.
#[test]
fn row_reductions_compile_with_nvrtc() {
    use super::nvrtc::{compile, defines, numbered, nvrtc_present};
    if !nvrtc_present() {
        return;
    }
    let k = ok(SOFTMAX_ROWS);
    let out = emit_cuda(&k);
    for (rows, block, warps) in
        [(16, 128, 4), (8, 256, 8), (1, 4096, 4), (2, 8192, 8), (64, 4, 1), (4, 64, 32)]
    {
        for spec in [0, 1] {
            let src =
                format!("{}{}", defines(&k, &out.specializations, block, rows, warps, spec), out.source);
            for arch in ["sm_80", "sm_90"] {
                if let Err(log) = compile(&src, arch) {
                    panic!(
                        "ROWS={rows} BLOCK={block} warps={warps} facts={spec} {arch}:\n{log}\n{}",
                        numbered(&src)
                    );
                }
            }
        }
    }
}

/// A full reduction reads each lane once: its source never stays in a row or column layout.
#[test]
fn full_reductions_read_length_layouts() {
    let k = ok("fn nvalid<const ROWS: usize, const BLOCK: usize>(x: *const f32, out: *mut i32, s: *mut f32, n: i32) {
        let rows = program_id(0) * ROWS + arange(0, ROWS);
        let cols = arange(0, BLOCK);
        let v = load(x + rows.expand_dims(1) * n + cols.expand_dims(0));
        store(out + rows, v.max(1).to(i32));
        store(out + program_id(0), (cols < n).to(i32).sum());
        store(s + program_id(0), v.sum(1).sum());
    }");
    let mut layout = super::super::layout::Layout::new(&k);
    let lay = super::super::slices::assign(&k, &mut layout);
    fuse_ir::visit_stmts(&k.body, &mut |st| {
        if let fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Reduce(_, src), .. } = st {
            let l = lay[src.0 as usize].expect("a tile");
            assert!(layout.row(l).is_none(), "the source of a full reduction is in a derived layout");
        }
    });
}
