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
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn row_reductions_compile_with_nvrtc() {
    use super::nvrtc::{compile, defines, numbered, require_nvrtc};
    require_nvrtc();
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

/// A full reduction keeps its source's row or column layout (the emitter folds each row or
/// column from its first holder; tests/emulated_cuda.rs `layout_totals_runs` checks the values):
/// `v.sum(1)` stays in the row layout, `(cols < n)` in the column layout `cols` takes for its
/// broadcast down the rows.
#[test]
fn full_reductions_keep_row_layouts() {
    let k = ok("fn nvalid<const ROWS: usize, const BLOCK: usize>(x: *const f32, out: *mut i32, s: *mut f32, n: i32) {
        let rows = program_id(0) * ROWS + arange(0, ROWS);
        let cols = arange(0, BLOCK);
        let v = load(x + rows.expand_dims(1) * n + cols.expand_dims(0));
        store(out + rows, v.max(1).to(i32));
        store(out + program_id(0), (cols < n).to(i32).sum());
        store(s + program_id(0), v.sum(1).sum());
    }");
    let mut layout = super::super::analysis::layout::Layout::new(&k);
    let lay = super::super::analysis::slices::assign(&k, &mut layout);
    let mut kept = Vec::new();
    fuse_ir::visit_stmts(&k.body, &mut |st| {
        if let fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Reduce(_, src), .. } = st {
            let l = lay[src.0 as usize].expect("a tile");
            kept.push(layout.row(l).map(|r| r.columns));
        }
    });
    assert_eq!(
        kept,
        [Some(true), Some(false)],
        "(cols < n) in the column layout, v.sum(1) in the row layout"
    );
}

/// A full reduction of a row (column) layout tile folds each row (column) once, from its first
/// holder, and leaves the tile in registers: the row sums and the broadcast weight row are not
/// demoted to their length's layout (nothing moves through shared memory but the reductions'
/// own cross-warp step).
#[test]
fn full_reductions_of_row_and_column_layouts_keep_them() {
    let src =
        emit_cuda(&ok("fn layout_totals<const N: usize>(x: *const f32, w: *const f32, out: *mut f32) {
    let rows = arange(0, 4);
    let cols = arange(0, N);
    let v = load(x + program_id(0) * 4 * N + rows.expand_dims(1) * N + cols.expand_dims(0));
    let wc = load(w + cols);
    let rs = (v * wc.expand_dims(0)).sum(1);
    store(out + program_id(0) * 2, sum(rs));
    store(out + program_id(0) * 2 + 1, sum(wc));
}"))
        .source;
    assert!(src.contains("FUSE_CI2(fuse_i) % FUSE_G"), "{src}");
    assert!(src.contains("(fuse_i) < (N)"), "{src}");
    assert!(!src.contains("through shared memory"), "{src}");
}

/// Warp slabs: a kernel whose only cross-lane operations are axis-1 and full reductions and
/// broadcasts may take them for its 2-D tiles (a preprocessor condition per launch; the
/// reduction gets its in-warp form), one with an axis-0 reduction never does (its lowering
/// counts threads in the plain order).
#[test]
fn warp_slabs_only_where_every_lowering_allows_them() {
    let rows = "fn k<const N: usize>(x: *const f32, out: *mut f32) {
    let offs = arange(0, 8).expand_dims(1) * N + arange(0, N).expand_dims(0);
    let v = load(x + offs);
    store(out + offs, v - v.max(1).expand_dims(1));
}";
    let src = emit_cuda(&ok(rows)).source;
    // A contiguous `%` steps by the slab's chunk distance (its runtime check would otherwise
    // fall back to a division per lane).
    let stepped = emit_cuda(&ok("fn k<const N: usize>(x: *const f32, m: i32, out: *mut i32) {
    let offs = arange(0, 8).expand_dims(1) * N + arange(0, N).expand_dims(0);
    let v = load(x + offs);
    store(out + offs, (v - v.max(1).expand_dims(1)).to(i32));
    let flat = program_id(0) * (8 * N) + arange(0, 8 * N);
    store(out + flat, flat % m);
}"))
    .source;
    assert!(stepped.contains("fuse_d = (int)(FUSE_CSTEP"), "{stepped}");
    assert!(src.contains("#define FUSE_SLAB2 (FUSE_FULL2 && ((N) / FUSE_VEC2 > 32) && (FUSE_L2 / FUSE_NUM_WARPS) % (N) == 0)"), "{src}");
    assert!(src.contains("#elif FUSE_SLAB2"), "{src}");
    assert!(
        src.contains("#define FUSE_IDX2(i) (FUSE_CI2((i) / FUSE_VEC2) * FUSE_VEC2 + (i) % FUSE_VEC2)"),
        "{src}"
    );
    let down = "fn k<const N: usize>(x: *const f32, out: *mut f32, col: *mut f32) {
    let offs = arange(0, 8).expand_dims(1) * N + arange(0, N).expand_dims(0);
    let v = load(x + offs);
    store(out + offs, v - v.max(1).expand_dims(1));
    store(col + arange(0, N), v.sum(0));
}";
    let src = emit_cuda(&ok(down)).source;
    assert!(src.contains("#define FUSE_SLAB2 0"), "{src}");
    assert!(!src.contains("#define FUSE_SLAB2 ("), "{src}");
}
