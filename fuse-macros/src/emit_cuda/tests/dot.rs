//! `dot`'s general fallback lowering: both operands through the shared scratch, a serial K loop per
//! output slot with unfused multiply and add; compiled with NVRTC for every input type, with and
//! without an accumulator, square and oblong tiles, const generic dims, and warp counts from one
//! (several output slots per thread) to 32 (more threads than output lanes).
use super::super::emit_cuda;
use super::nvrtc::{compile, numbered, nvrtc_present};
use crate::tests::ok;

/// A `[BM, BK] @ [BK, BN]` product of `T` tiles over a K loop (the Triton tutorial's matmul),
/// edges masked, accumulating in `ACC` from `START`.
fn matmul(t: &str, acc: &str, start: &str) -> String {
    format!(
        "fn mm<const BM: usize, const BN: usize, const BK: usize>(
    a: *const {t}, b: *const {t}, c: *mut {acc}, m: i32, n: i32, k: i32) {{
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = {start};
    for k0 in (0..k).step_by(BK) {{
        let ka = k0 + rk;
        let x = load(a + rm.expand_dims(1) * k + ka.expand_dims(0),
                     (rm < m).expand_dims(1) & (ka < k).expand_dims(0), 0);
        let y = load(b + ka.expand_dims(1) * n + rn.expand_dims(0),
                     (ka < k).expand_dims(1) & (rn < n).expand_dims(0), 0);
        acc = dot(x, y, acc);
    }}
    let one = dot(load(a + rm.expand_dims(1) * k + rk.expand_dims(0)), load(b + rk.expand_dims(1) * n + rn.expand_dims(0)));
    store(c + rm.expand_dims(1) * n + rn.expand_dims(0), acc + one,
          (rm < m).expand_dims(1) & (rn < n).expand_dims(0));
}}"
    )
}

fn kernels() -> Vec<(&'static str, String)> {
    vec![
        ("f16", matmul("f16", "f32", "zeros([BM, BN])")),
        ("bf16", matmul("bf16", "f32", "zeros([BM, BN])")),
        ("f32", matmul("f32", "f32", "zeros([BM, BN])")),
        ("i8", matmul("i8", "i32", "full([BM, BN], 0)")),
    ]
}

#[test]
fn dot_fallback_goes_through_shared_memory_with_unfused_steps() {
    // f16 and bf16 take the tensor cores (`dot_of_half_inputs_takes_the_tensor_cores`).
    for (t, src) in kernels().into_iter().filter(|(t, _)| *t == "f32" || *t == "i8") {
        let out = emit_cuda(&ok(&src)).source;
        assert!(out.contains("the general fallback, the operands through shared memory"), "{t}\n{out}");
        assert!(out.contains("__shared__ __align__(1024) unsigned char fuse_xs[fuse_xs_bytes]"), "{t}\n{out}");
        assert!(out.contains("((FUSE_L"), "{t}: the scratch holds both operands\n{out}");
        assert!(out.contains("for (int fuse_k = 0; fuse_k < BK; ++fuse_k)"), "{t}\n{out}");
        let float = t != "i8";
        assert_eq!(out.contains("__fadd_rn(fuse_r, __fmul_rn("), float, "{t}\n{out}");
        assert_eq!(out.contains("fuse_tf32("), t == "f32", "{t}: f32 inputs round to TF32\n{out}");
        assert_eq!(out.contains("cvt.rna.tf32.f32"), t == "f32", "{t}\n{out}");
        // The accumulator's own slot starts the sum (`acc = dot(x, y, acc)` in place).
        assert!(out.contains("fuse_r = acc[fuse_i];"), "{t}\n{out}");
    }
}

#[test]
fn dot_of_half_inputs_takes_the_tensor_cores() {
    for (t, src) in kernels().into_iter().filter(|(t, _)| *t == "f16" || *t == "bf16") {
        let k = ok(&src);
        let out = emit_cuda(&k).source;
        assert!(out.contains("on tensor cores"), "{t}\n{out}");
        assert!(!out.contains("the general fallback"), "{t}\n{out}");
        assert!(out.contains(&format!("mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32")), "{t}\n{out}");
        assert!(out.contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), "{t}\n{out}");
        // The loop-carried accumulator is held in the MMA layout and updated in place.
        let acc = crate::tests::var_id(&k, "acc");
        assert!(out.contains(&format!("float acc[FUSE_EPT")), "{t}\n{out}");
        assert!(out.contains("// MMA layout"), "{t}\n{out}");
        assert!(!out.contains("float fuse_c[FUSE_EPT"), "{t}: acc {acc:?} converts instead of updating in place\n{out}");
    }
}

#[test]
fn dot_fallback_compiles_with_nvrtc() {
    if !nvrtc_present() {
        return;
    }
    let mut jobs = Vec::new();
    for (t, src) in kernels() {
        let k = ok(&src);
        let out = emit_cuda(&k);
        // (BM, BN, BK, warps): square, oblong, one warp over 1024 outputs, 32 warps over 256.
        for (i, &(bm, bn, bk, warps)) in
            [(16, 16, 16, 1), (64, 32, 16, 4), (32, 64, 32, 8), (16, 16, 16, 32), (128, 16, 16, 2)]
                .iter()
                .enumerate()
        {
            let spec = (i % 2) as u32;
            let mut defs = format!(
                "#define BM {bm}\n#define BN {bn}\n#define BK {bk}\n#define FUSE_NUM_WARPS {warps}\n"
            );
            for s in &out.specializations {
                defs.push_str(&format!("#define {} {spec}\n", s.macro_name(&k.params)));
            }
            // Both architectures for the first two configurations, one each after (NVRTC is slow).
            let archs: &[&str] = match i {
                0 | 1 => &["sm_80", "sm_90", "sm_90a"],
                _ if i % 2 == 0 => &["sm_80"],
                _ => &["sm_90"],
            };
            for &arch in archs {
                jobs.push((
                    format!("{t} BM={bm} BN={bn} BK={bk} warps={warps} {arch}"),
                    defs.clone() + &out.source,
                    arch,
                ));
            }
        }
    }
    let failures: Vec<String> = jobs
        .iter()
        .filter_map(|(what, src, arch)| {
            compile(src, arch).err().map(|log| format!("== {what}\n{log}\n{}", numbered(src)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} compiles failed; first:\n{}",
        failures.len(),
        jobs.len(),
        failures[0]
    );
}

/// On sm_90a the f16/bf16 products whose blocks come in whole warpgroups take `wgmma` (the
/// operands read through descriptors, no `ldmatrix`); on sm_90, and where the warps or rows do not
/// make warpgroups, `mma.sync`.
#[test]
fn dot_on_sm90a_takes_wgmma_where_warpgroups_fit() {
    if !nvrtc_present() {
        return;
    }
    let mut failures = Vec::new();
    for (t, src) in kernels().into_iter().filter(|(t, _)| *t == "f16" || *t == "bf16") {
        let k = ok(&src);
        let out = emit_cuda(&k);
        // (BM, BN, BK, warps, arch, wgmma expected)
        for (bm, bn, bk, warps, arch, wg) in [
            (128, 128, 32, 4, "sm_90a", true),
            (128, 256, 64, 8, "sm_90a", true),
            (256, 128, 64, 8, "sm_90a", true),
            (64, 64, 128, 4, "sm_90a", true),
            (128, 128, 32, 4, "sm_90", false),
            (128, 128, 32, 2, "sm_90a", false),
            (32, 64, 32, 4, "sm_90a", false),
        ] {
            let mut defs = format!("#define BM {bm}\n#define BN {bn}\n#define BK {bk}\n#define FUSE_NUM_WARPS {warps}\n");
            for s in &out.specializations {
                defs.push_str(&format!("#define {} 1\n", s.macro_name(&k.params)));
            }
            let what = format!("{t} BM={bm} BN={bn} BK={bk} warps={warps} {arch}");
            let src = defs + &out.source;
            match compile(&src, arch) {
                Err(log) => failures.push(format!("== {what}\n{log}\n{}", numbered(&src))),
                Ok(ptx) => {
                    let (has_wg, has_mma) = (ptx.contains("wgmma.mma_async"), ptx.contains("mma.sync"));
                    if has_wg != wg || has_mma == wg {
                        failures.push(format!("== {what}: wgmma {has_wg}, mma.sync {has_mma}, expected wgmma {wg}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore]
fn dot_dump() {
    for (t, src) in kernels() {
        println!("==== {t}\n{}", emit_cuda(&ok(&src)).source);
    }
}

/// `FUSE_DUMP_KERNEL=path cargo test -p fuse-macros --lib dump_kernel_file -- --ignored --nocapture`
/// prints the emitted CUDA of the `fn` in that file (a development aid: `ptxas -v` on it).
#[test]
#[ignore]
fn dump_kernel_file() {
    let path = std::env::var("FUSE_DUMP_KERNEL").expect("FUSE_DUMP_KERNEL=path of a file holding one kernel fn");
    let src = std::fs::read_to_string(path).expect("readable kernel file");
    println!("{}", emit_cuda(&ok(&src)).source);
}

/// A `[M, 64] @ [64, N]` K loop of f16 tiles whose `x` load is written by `x_load` (the body may
/// use `ks`, `rm`, `rk` and the loop's `k0`), for the pipelining rules.
fn k_loop(x_load: &str, extra: &str) -> String {
    format!(
        "fn kl(a: *const f16, b: *const f16, c: *mut f32, k: i32) {{
    let rm = arange(0, 64);
    let rk = arange(0, 32);
    let mut acc = zeros([64, 64]);
    for k0 in (0..k).step_by(32) {{
        let ks = k0 + rk;
        let x = {x_load};
        let y = load(b + ks.expand_dims(1) * 64 + rm.expand_dims(0), (ks < k).expand_dims(1), 0.0);
        acc = dot(x, y, acc);
        {extra}
    }}
    store(c + rm.expand_dims(1) * 64 + rm.expand_dims(0), acc);
}}"
    )
}

const X_LOAD: &str = "load(a + rm.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0), 0.0)";

#[test]
fn dot_operand_loads_of_a_k_loop_are_pipelined() {
    let out = emit_cuda(&ok(&k_loop(X_LOAD, ""))).source;
    assert!(out.contains("// pipelined: x, y loaded FUSE_PIPE - 1 iterations ahead"), "{out}");
    assert!(out.contains("fuse_cp_async<FUSE_VEC"), "{out}");
    assert!(out.contains("fuse_cp_async_wait<FUSE_PIPE - 2 - FUSE_INFLIGHT0>();"), "{out}");
    // `acc = dot(x, y, acc)` alone reads acc: on the wgmma path its MMAs stay in flight, the
    // ring one stage less ahead, and the accumulator is waited for after the loop.
    assert!(out.contains("#define FUSE_INFLIGHT0 (FUSE_PIPE >= 3 && FUSE_WG"), "{out}");
    assert!(out.contains("for (int fuse_p = 0; fuse_p < FUSE_PIPE - 1 - FUSE_INFLIGHT0; ++fuse_p)"), "{out}");
    assert!(out.contains("fuse_wg_wait<1>();"), "{out}");
    assert!(out.contains("the last iteration's MMAs, before the accumulators are read"), "{out}");
    assert!(out.contains("const int k0 = fuse_ahead0;"), "the slice is replayed for a later counter\n{out}");
    assert!(out.contains("// x: in its stage, loaded ahead"), "{out}");
    // The dot reads the stages: no staging of its own.
    assert!(out.contains("const unsigned short* fuse_sa = (unsigned short*)(fuse_ring + fuse_rd0"), "{out}");
    assert!(!out.contains("unsigned short* fuse_sa = (unsigned short*)fuse_xs;"), "{out}");
    assert!(out.contains("#define FUSE_SCRATCH_DYNAMIC (1)"), "{out}");
    // The index tiles' broadcasts are recomputed, not moved through shared memory.
    assert!(out.contains("recomputed at each slot's lane"), "{out}");
    assert!(!out.contains("*)fuse_xs)[FUSE_IDX"), "a broadcast still goes through the scratch\n{out}");
}

/// An accumulator the body reads besides its `dot` (attention's rescaled `o`) waits for its
/// MMAs in each iteration.
#[test]
fn an_accumulator_read_in_the_loop_is_not_left_in_flight() {
    let out = emit_cuda(&ok(&k_loop(X_LOAD, "acc = acc * 0.5;"))).source;
    assert!(out.contains("pipelined: x, y"), "{out}");
    assert!(out.contains("#define FUSE_INFLIGHT0 0"), "{out}");
    assert!(!out.contains("fuse_wg_wait<1>();"), "{out}");
}

#[test]
fn loads_that_are_not_pure_dot_operands_are_not_pipelined() {
    let cases = [
        // masked-off lanes read 1, which cp.async cannot fill
        (k_loop(&X_LOAD.replace("0.0)", "1.0)"), ""), "other is not zero"),
        // the operand is also read outside the dot
        (k_loop(X_LOAD, "store(c + rm.expand_dims(1) * 64 + ks.expand_dims(0), x.to(f32));"), "x has another use"),
        // an offset from a value loaded in the loop
        (
            k_loop(&X_LOAD.replace("* k +", "* load(a + k0) .to(i32) +"), ""),
            "the offset depends on a load",
        ),
    ];
    for (src, why) in cases {
        let out = emit_cuda(&ok(&src)).source;
        assert!(!out.contains("pipelined: x"), "{why}\n{out}");
        assert!(out.contains("on tensor cores"), "{why}\n{out}");
    }
}

#[test]
fn a_k_loop_inside_a_pipelined_loop_is_not_pipelined() {
    let inner = "let mut acc2 = zeros([64, 64]);
        for k1 in (0..k).step_by(32) {
            let kt = k1 + rk;
            let u = load(a + rm.expand_dims(1) * k + kt.expand_dims(0));
            let v = load(b + kt.expand_dims(1) * 64 + rm.expand_dims(0));
            acc2 = dot(u, v, acc2);
        }
        store(c + rm.expand_dims(1) * 64 + rm.expand_dims(0), acc2);";
    let out = emit_cuda(&ok(&k_loop(X_LOAD, inner))).source;
    assert_eq!(out.matches("// pipelined:").count(), 1, "{out}");
    assert!(out.contains("// pipelined: x, y"), "{out}");
}

#[test]
fn a_transposed_b_operand_is_read_k_major_without_moving_it() {
    // In a K loop (pipelined: `w`'s [N, K] tile is the stage) and alone (staged from registers).
    let looped = "fn kl(a: *const f16, b: *const f16, c: *mut f32, k: i32) {
        let rm = arange(0, 64);
        let rk = arange(0, 32);
        let mut acc = zeros([64, 64]);
        for k0 in (0..k).step_by(32) {
            let ks = k0 + rk;
            let x = load(a + rm.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0), 0.0);
            let w = load(b + rm.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0), 0.0);
            acc = dot(x, trans(w), acc);
        }
        store(c + rm.expand_dims(1) * 64 + rm.expand_dims(0), acc);
    }";
    let once = "fn once(a: *const f16, b: *const f16, c: *mut f32) {
        let r = arange(0, 64);
        let x = load(a + r.expand_dims(1) * 32 + arange(0, 32).expand_dims(0));
        let w = load(b + arange(0, 16).expand_dims(1) * 32 + arange(0, 32).expand_dims(0));
        store(c + r.expand_dims(1) * 16 + arange(0, 16).expand_dims(0), dot(x, trans(w)));
    }";
    for (what, src) in [("looped", looped), ("once", once)] {
        let out = emit_cuda(&ok(src)).source;
        assert!(out.contains("read by its dot as K-major B"), "{what}\n{out}");
        assert!(out.contains("on tensor cores"), "{what}\n{out}");
        assert!(out.contains("fuse_ldmatrix_x4(fuse_q,") || out.contains("fuse_ldmatrix_x2(fuse_rb"), "{what}\n{out}");
        assert_eq!(
            out.matches("= trans(").count(),
            out.matches("read by its dot as K-major B").count(),
            "{what}: the transpose is not emitted\n{out}"
        );
        assert_eq!(out.contains("// pipelined: x, w"), what == "looped", "{what}\n{out}");
    }
}

#[test]
fn i8_takes_the_tensor_cores_with_a_k_major_b_only() {
    let src = |b: &str| {
        format!(
            "fn q(a: *const i8, w: *const i8, c: *mut i32) {{
        let r = arange(0, 64);
        let kk = arange(0, 64);
        let x = load(a + r.expand_dims(1) * 64 + kk.expand_dims(0));
        let y = load(w + r.expand_dims(1) * 64 + kk.expand_dims(0));
        store(c + r.expand_dims(1) * 64 + r.expand_dims(0), dot(x, {b}));
    }}"
        )
    };
    let k = ok(&src("trans(y)"));
    let emitted = emit_cuda(&k);
    let out = emitted.source.clone();
    assert!(out.contains("m16n8k32.row.col.s32.s8.s8.s32"), "{out}");
    assert!(out.contains("fuse_mma_s8(") && out.contains("read by its dot as K-major B"), "{out}");
    assert!(out.contains("int fuse_c[FUSE_EPT") || out.contains("int t"), "{out}");
    // On sm_90a with a warpgroup: wgmma's k32 s8 form, both operands K-major.
    if nvrtc_present() {
        for (warps, wg) in [(4, true), (2, false)] {
            let mut full = format!("#define FUSE_NUM_WARPS {warps}\n");
            for s in &emitted.specializations {
                full.push_str(&format!("#define {} 1\n", s.macro_name(&k.params)));
            }
            full.push_str(&out);
            let ptx = compile(&full, "sm_90a").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&full)));
            assert_eq!(ptx.contains("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"), wg, "{warps} warps");
            assert_eq!(ptx.contains("mma.sync.aligned.m16n8k32"), !wg, "{warps} warps");
        }
    }
    // A [K, N] i8 B has no byte ldmatrix.trans: the general fallback.
    let out = emit_cuda(&ok(&src("y"))).source;
    assert!(out.contains("the general fallback") && !out.contains("fuse_mma_s8("), "{out}");
}
