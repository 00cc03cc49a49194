//! Loads that read a 2-D box of a strided matrix ([`fuse_ir::Kernel::tensor_box`]): which
//! pipelined `dot` operands qualify for TMA, what the host computes for their tensor maps, and
//! the `FUSE_TMA_<k>` path and parameters the source gets.
use super::super::emit_cuda;
use crate::tests::ok;
use fuse_ir::{HostScalar, Specialization};

/// A matmul whose operand loads are written in the ways the language allows: the product before
/// or after the reshape, the sum either way round, the mask's parts in either order.
const MATMUL: &str = "fn mm<const BM: usize, const BN: usize, const BK: usize>(
    a: *const f16, b: *const f16, c: *mut f32, m: i32, n: i32, k: i32, lda: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN]);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let x = load(a + (rm * lda).expand_dims(1) + ks.expand_dims(0),
                     (ks < k).expand_dims(0) & (rm < m).expand_dims(1), 0.0);
        let y = load(b + rn.expand_dims(0) + ks.expand_dims(1) * n,
                     (ks < k).expand_dims(1) & (rn < n).expand_dims(0), 0.0);
        acc = dot(x, y, acc);
    }
    store(c + rm.expand_dims(1) * n + rn.expand_dims(0), acc, (rm < m).expand_dims(1) & (rn < n).expand_dims(0));
}";

#[test]
fn matmul_operands_are_tensor_boxes_with_host_computable_maps() {
    let k = ok(MATMUL);
    let accesses = k.accesses();
    let boxes: Vec<_> = accesses.iter().map(|a| k.tensor_box(a)).collect();
    assert!(boxes[0].is_some() && boxes[1].is_some(), "{boxes:?}");
    assert!(boxes[2].is_none(), "a store is not a box load");
    let args = |i: u32| match i {
        3 => Some(HostScalar::Int(1000)),
        4 => Some(HostScalar::Int(640)),
        5 => Some(HostScalar::Int(320)),
        6 => Some(HostScalar::Int(328)),
        _ => None,
    };
    let value = |v| k.host_program(v).and_then(|p| p.eval(&args, &[64, 128, 32]));
    let int = |v: i128| Some(HostScalar::Int(v));
    // A: rows of `lda` elements, `m` rows, `k` columns; B: rows of `n`, `k` rows, `n` columns.
    let a = boxes[0].as_ref().unwrap();
    let ends =
        |b: &fuse_ir::TensorBox| [value(b.stride), value(b.row_end.unwrap()), value(b.col_end.unwrap())];
    assert_eq!(ends(a), [int(328), int(1000), int(320)]);
    let b = boxes[1].as_ref().unwrap();
    assert_eq!(ends(b), [int(640), int(320), int(640)]);
    assert!(a.base_index.is_none() && a.base_pitch.is_empty());
    // The box starts: the loop counter along A's columns and B's rows.
    assert_eq!(a.col_start.var, b.row_start.var);
    assert!(a.col_start.var.is_some() && a.row_start.var.is_some());
    let out = emit_cuda(&k);
    for s in [Specialization::TensorBox(0), Specialization::TensorBox(1)] {
        assert!(out.specializations.contains(&s), "{s:?} not listed: {:?}", out.specializations);
    }
    let src = &out.source;
    assert!(
        src.contains("unsigned long long* fuse_err,\n    const __grid_constant__ fuse_tmap_t fuse_tmap0,")
    );
    assert!(src.contains("#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && FUSE_TMA_1"));
    assert!(
        src.contains("fuse_tma_2d(") && src.contains("fuse_mbar_wait(") && src.contains("fuse_mbar_expect(")
    );
    // The cp.async copy stays for launches without a map.
    assert!(src.contains("fuse_cp_async<"));
}

#[test]
fn loads_that_are_not_a_box_of_their_mask_keep_cp_async_only() {
    // Each load differs from a box in one way: a mask on another tile than the offset's rows, a
    // mask by `<=`, a base with two factors the host cannot compute, a mask of both bounds on one
    // axis, columns reshaped onto the rows.
    for (x, y) in [
        ("a + rm.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0) & (rk < m).expand_dims(1)", "b + ks.expand_dims(1) * n + rn.expand_dims(0), (ks < k).expand_dims(1) & (rn <= n).expand_dims(0)"),
        ("a + program_id(0) * program_id(1) * 64 + rm.expand_dims(1) * k + ks.expand_dims(0), (rm < m).expand_dims(1)", "b + ks.expand_dims(1) * n + rn.expand_dims(0), (ks < k).expand_dims(1) & (ks < n).expand_dims(1)"),
        // `ks` reshaped from a row to a column: lane (i, j) reads `ks[i]`, not `ks[j]`.
        ("a + rm.expand_dims(1) * k + broadcast_to(reshape(ks.expand_dims(0), [64, 1]), [64, 64]), (rm < m).expand_dims(1)", "b + ks.expand_dims(1) * n + rn.expand_dims(0), (ks < k).expand_dims(1) & (rn <= n).expand_dims(0)"),
    ] {
        let src = format!(
            "fn mm(a: *const f16, b: *const f16, c: *mut f32, m: i32, n: i32, k: i32) {{
                let rm = program_id(0) * 64 + arange(0, 64);
                let rn = program_id(1) * 64 + arange(0, 64);
                let rk = arange(0, 64);
                let mut acc = zeros([64, 64]);
                for k0 in (0..k).step_by(64) {{
                    let ks = k0 + rk;
                    let x = load({x}, 0.0);
                    let y = load({y}, 0.0);
                    acc = dot(x, y, acc);
                }}
                store(c + rm.expand_dims(1) * n + rn.expand_dims(0), acc);
            }}"
        );
        let k = ok(&src);
        assert!(k.accesses().iter().all(|a| k.tensor_box(a).is_none()), "{src}");
        let out = emit_cuda(&k);
        assert!(!out.specializations.iter().any(|s| matches!(s, Specialization::TensorBox(_))), "{src}");
        assert!(out.source.contains("fuse_cp_async<") && !out.source.contains("fuse_tmap"), "{src}");
    }
}

#[test]
fn a_base_per_program_is_a_third_dimension_and_missing_bounds_are_left_to_the_launch() {
    // Attention's keys: a head offset computed from the program, no column mask.
    let k = ok("fn att<const BN: usize, const D: usize>(q: *const f16, kk: *const f16, o: *mut f32, n: i32, heads: i32) {
        let head = program_id(1) / heads;
        let kv = head * n * D;
        let rm = program_id(0) * 64 + arange(0, 64);
        let rd = arange(0, D);
        let qt = load(q + rm.expand_dims(1) * D + rd.expand_dims(0));
        let mut acc = zeros([64, BN]);
        for n0 in (0..n).step_by(BN) {
            let rn = n0 + arange(0, BN);
            let kt = load(kk + kv + rn.expand_dims(1) * D + rd.expand_dims(0), (rn < n).expand_dims(1), 0.0);
            acc = acc + dot(qt, trans(kt));
        }
        store(o + rm.expand_dims(1) * BN + arange(0, BN).expand_dims(0), acc);
    }");
    let accesses = k.accesses();
    let b = k.tensor_box(&accesses[1]).expect("the key load is a box");
    assert!(b.row_end.is_some() && b.col_end.is_none());
    assert!(b.base_index.is_some(), "the head is computed from the program");
    assert_eq!(b.base_pitch.len(), 2, "n and D: {b:?}");
    let args = |i: u32| match i {
        3 => Some(HostScalar::Int(1000)),
        _ => None,
    };
    let pitch: Vec<_> =
        b.base_pitch.iter().map(|&v| k.host_program(v).and_then(|p| p.eval(&args, &[64, 128]))).collect();
    assert!(
        pitch.contains(&Some(HostScalar::Int(1000))) && pitch.contains(&Some(HostScalar::Int(128))),
        "{pitch:?}"
    );
    let src = emit_cuda(&k).source;
    assert!(src.contains("fuse_tma_3d(fuse_dst"), "the per-program base is the third coordinate");
}
