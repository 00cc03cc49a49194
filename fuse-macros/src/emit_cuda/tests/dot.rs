//! `dot`'s lowerings: the general fallback (both operands through the shared scratch, a serial K
//! loop per output slot with unfused multiply and add; i8 with a `[K, N]` B), the tensor cores
//! (f16, bf16, f32 as TF32, i8 with a K-major B), pipelined K loops and K-major operands;
//! compiled with NVRTC for every input type, with and without an accumulator, square and oblong
//! tiles, const generic dims, and warp counts from one (several output slots per thread) to 32
//! (more threads than output lanes).
use super::super::emit_cuda;
use super::nvrtc::{compile, numbered, require_nvrtc};
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
    // f16, bf16 and f32 take the tensor cores (`dot_of_half_inputs_takes_the_tensor_cores`,
    // `dot_of_f32_inputs_takes_tf32_tensor_cores`); i8 with a [K, N] B is the fallback's.
    for (t, src) in kernels().into_iter().filter(|(t, _)| *t == "i8") {
        let out = emit_cuda(&ok(&src)).source;
        assert!(out.contains("the general fallback, the operands through shared memory"), "{t}\n{out}");
        assert!(
            out.contains("__shared__ __align__(1024) unsigned char fuse_xs[fuse_xs_bytes]"),
            "{t}\n{out}"
        );
        assert!(out.contains("((FUSE_L"), "{t}: the scratch holds both operands\n{out}");
        assert!(out.contains("for (int fuse_k = 0; fuse_k < BK; ++fuse_k)"), "{t}\n{out}");
        assert!(
            out.contains("fuse_r = (int)((unsigned int)fuse_r + (unsigned int)("),
            "{t}: wrapping i32 steps\n{out}"
        );
        assert!(!out.contains("__fadd_rn(fuse_r, __fmul_rn("), "{t}\n{out}");
        assert!(!out.contains("cvt.rna.tf32.f32"), "{t}\n{out}");
        // The accumulator's own slot starts the sum (`acc = dot(x, y, acc)` in place).
        assert!(out.contains("fuse_r = acc[fuse_i];"), "{t}\n{out}");
    }
}

/// f32 `dot` takes TF32 tensor cores: `mma.sync` m16n8k8 on fragments rounded with
/// `cvt.rna.tf32.f32` (as the interpreter rounds), the operands staged with the f32 swizzle, A
/// read by `ldmatrix`, a `[K, N]` B by 32-bit shared loads; never `wgmma` (the layout's warpgroup
/// grid is off and the module reports mma.sync).
#[test]
fn dot_of_f32_inputs_takes_tf32_tensor_cores() {
    let (_, src) = kernels().into_iter().find(|(t, _)| *t == "f32").expect("an f32 kernel");
    let k = ok(&src);
    let out = emit_cuda(&k).source;
    assert!(out.contains("on tensor cores"), "{out}");
    assert!(!out.contains("the general fallback"), "{out}");
    assert!(out.contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), "{out}");
    assert!(out.contains("fuse_mma_tf32(acc + "), "the loop's accumulator is updated in place\n{out}");
    assert!(out.contains("cvt.rna.tf32.f32"), "{out}");
    assert!(out.contains("fuse_tf32_frag<4>(fuse_ra[fuse_mi]);"), "A fragments are rounded\n{out}");
    assert!(out.contains("fuse_tf32_frag<2>(fuse_rb[fuse_ni]);"), "B fragments are rounded\n{out}");
    assert!(
        out.contains("fuse_ldmatrix_x4(fuse_ra[fuse_mi], fuse_smem_addr(fuse_sa + fuse_swz_f32("),
        "{out}"
    );
    assert!(
        out.contains("*(const unsigned int*)(fuse_sb + fuse_swz_f32(fuse_r + 4, fuse_c, BN, BK))"),
        "{out}"
    );
    assert!(out.contains("for (int fuse_k = 0; fuse_k < (BK) / 8; ++fuse_k)"), "K steps of 8\n{out}");
    assert!(!out.contains("fuse_mma_f16(acc") && !out.contains("ldmatrix_x4_trans(fuse_q"), "{out}");
    // The K loop is pipelined: cp.async of whole 16-byte chunks (4 floats) into f32 stages.
    assert!(out.contains("// pipelined: x, y loaded FUSE_PIPE - 1 iterations ahead"), "{out}");
    assert!(out.contains("fuse_cp_async<FUSE_VEC"), "{out}");
    assert!(out.contains(" * 4 <= 16"), "whole chunks of at most 4 floats\n{out}");
    assert!(
        out.contains("fuse_smem_addr((float*)((unsigned short*)(fuse_ring"),
        "stage addresses of f32 elements\n{out}"
    );
    assert!(
        out.contains("((BM) * (BK) * 4 + 1023) / 1024 * 1024"),
        "f32 stages are 4 bytes an element\n{out}"
    );
    // No warpgroups: wgmma's TF32 wants K-major operands.
    assert!(!out.contains("fuse_wgmma") && !out.contains("wgmma.") && !out.contains("? 2u"), "{out}");
    assert!(out.contains("#if 0\n#define FUSE_WG"), "{out}");
    assert!(out.contains("fuse_dot_path = (1u) | (1u);"), "{out}");
}

/// The f32 operands of a dot outside a loop are staged from registers (whole 16-byte words where
/// a chunk allows), and `dot(x, trans(w))` of f32 reads `w` K-major with `ldmatrix`.
#[test]
fn f32_operands_staged_from_registers_and_k_major() {
    let src = "fn once(a: *const f32, b: *const f32, c: *mut f32) {
        let r = arange(0, 64);
        let x = load(a + r.expand_dims(1) * 32 + arange(0, 32).expand_dims(0));
        let w = load(b + arange(0, 16).expand_dims(1) * 32 + arange(0, 32).expand_dims(0));
        store(c + r.expand_dims(1) * 16 + arange(0, 16).expand_dims(0), dot(x, trans(w)));
    }";
    let out = emit_cuda(&ok(src)).source;
    assert!(out.contains("read by its dot as K-major B"), "{out}");
    assert!(out.contains("fuse_mma_tf32("), "{out}");
    assert!(out.contains("fuse_ldmatrix_x4(fuse_q, fuse_smem_addr(fuse_sb + fuse_swz_f32(fuse_n0 + (fuse_lane >> 4) * 8, fuse_kc, 32, 16)))"), "{out}");
    assert!(out.contains("fuse_w[fuse_v] = __float_as_uint("), "{out}");
    assert!(out.contains("*(float*)((float*)(fuse_sa + fuse_swz_f32("), "the per-lane staging\n{out}");
    assert!(!out.contains("fuse_wgmma") && !out.contains("wgmma."), "{out}");
    assert_eq!(out.matches("= trans(").count(), 1, "the transpose is not emitted, only named\n{out}");
}

/// On sm_80, sm_90 and sm_90a, f32 dots compile to TF32 `mma.sync.m16n8k8` and never to `wgmma`,
/// at block shapes and warp counts where f16 takes `wgmma` on sm_90a (and ones where it does not),
/// in the pipelined K loop, outside it, and with a K-major B.
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn f32_dot_compiles_to_tf32_mma_sync_on_every_arch() {
    require_nvrtc();
    let nt = "fn nt<const BM: usize, const BN: usize, const BK: usize>(a: *const f32, b: *const f32, c: *mut f32, k: i32) {
        let rm = arange(0, BM);
        let rn = arange(0, BN);
        let rk = arange(0, BK);
        let mut acc = zeros([BM, BN]);
        for k0 in (0..k).step_by(BK) {
            let ks = k0 + rk;
            let x = load(a + rm.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0), 0.0);
            let w = load(b + rn.expand_dims(1) * k + ks.expand_dims(0), (ks < k).expand_dims(0), 0.0);
            acc = dot(x, trans(w), acc);
        }
        store(c + rm.expand_dims(1) * BN + rn.expand_dims(0), acc);
    }";
    let (_, mm) = kernels().into_iter().find(|(t, _)| *t == "f32").expect("an f32 kernel");
    let mut failures = Vec::new();
    for (what, src) in [("matmul", mm.as_str()), ("k-major", nt)] {
        let k = ok(src);
        let out = emit_cuda(&k);
        for (bm, bn, bk, warps, stages) in [
            (128, 128, 32, 4, 3),
            (128, 256, 32, 8, 2),
            (64, 64, 64, 4, 4),
            (32, 64, 16, 1, 2),
            (16, 16, 16, 2, 3),
        ] {
            for arch in ["sm_80", "sm_90", "sm_90a"] {
                let mut defs = format!(
                    "#define BM {bm}\n#define BN {bn}\n#define BK {bk}\n#define FUSE_NUM_WARPS {warps}\n#define FUSE_NUM_STAGES {stages}\n"
                );
                for s in &out.specializations {
                    defs.push_str(&format!("#define {} 1\n", s.macro_name(&k.params)));
                }
                let label =
                    format!("{what} f32 BM={bm} BN={bn} BK={bk} warps={warps} stages={stages} {arch}");
                let full = defs + &out.source;
                match compile(&full, arch) {
                    Err(log) => failures.push(format!("== {label}\n{log}\n{}", numbered(&full))),
                    Ok(ptx) => {
                        let tf32 = ptx.contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
                        let (wg, cvt) = (ptx.contains("wgmma"), ptx.contains("cvt.rna.tf32.f32"));
                        if !tf32 || wg || !cvt {
                            failures.push(format!(
                                "== {label}: m16n8k8 tf32 {tf32}, wgmma {wg}, cvt.rna.tf32 {cvt}"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures; first:\n{}", failures.len(), failures[0]);
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
        assert!(out.contains("float acc[FUSE_EPT"), "{t}\n{out}");
        assert!(out.contains("// MMA layout"), "{t}\n{out}");
        assert!(
            !out.contains("float fuse_c[FUSE_EPT"),
            "{t}: acc {acc:?} converts instead of updating in place\n{out}"
        );
    }
}

#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn dot_fallback_compiles_with_nvrtc() {
    require_nvrtc();
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
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn dot_on_sm90a_takes_wgmma_where_warpgroups_fit() {
    require_nvrtc();
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
            let mut defs = format!(
                "#define BM {bm}\n#define BN {bn}\n#define BK {bk}\n#define FUSE_NUM_WARPS {warps}\n"
            );
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
                        failures.push(format!(
                            "== {what}: wgmma {has_wg}, mma.sync {has_mma}, expected wgmma {wg}"
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Prints the emitted CUDA of the `dot` kernels above (a development aid).
#[test]
#[ignore = "a development aid, not a check: prints the dot kernels' CUDA (--ignored --nocapture)"]
fn dot_dump() {
    for (t, src) in kernels() {
        println!("==== {t}\n{}", emit_cuda(&ok(&src)).source);
    }
}

/// `FUSE_DUMP_KERNEL=path cargo test -p fuse-macros --lib dump_kernel_file -- --ignored --nocapture`
/// prints the emitted CUDA of the `fn` in that file (a development aid: `ptxas -v` on it).
#[test]
#[ignore = "a development aid, not a check: FUSE_DUMP_KERNEL=path, --ignored --nocapture"]
fn dump_kernel_file() {
    let path =
        std::env::var("FUSE_DUMP_KERNEL").expect("FUSE_DUMP_KERNEL=path of a file holding one kernel fn");
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
        (
            k_loop(X_LOAD, "store(c + rm.expand_dims(1) * 64 + ks.expand_dims(0), x.to(f32));"),
            "x has another use",
        ),
        // an offset from a value loaded in the loop
        (k_loop(&X_LOAD.replace("* k +", "* load(a + k0) .to(i32) +"), ""), "the offset depends on a load"),
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
        assert!(
            out.contains("fuse_ldmatrix_x4(fuse_q,") || out.contains("fuse_ldmatrix_x2(fuse_rb"),
            "{what}\n{out}"
        );
        assert_eq!(
            out.matches("= trans(").count(),
            out.matches("read by its dot as K-major B").count(),
            "{what}: the transpose is not emitted\n{out}"
        );
        assert_eq!(out.contains("// pipelined: x, w"), what == "looped", "{what}\n{out}");
    }
}

/// A `[64, 64]` i8 `dot(x, b)` of two loaded tiles, `b` being `trans(y)` or `y`.
fn i8_dot(b: &str) -> String {
    format!(
        "fn q(a: *const i8, w: *const i8, c: *mut i32) {{
        let r = arange(0, 64);
        let kk = arange(0, 64);
        let x = load(a + r.expand_dims(1) * 64 + kk.expand_dims(0));
        let y = load(w + r.expand_dims(1) * 64 + kk.expand_dims(0));
        store(c + r.expand_dims(1) * 64 + r.expand_dims(0), dot(x, {b}));
    }}"
    )
}

#[test]
fn i8_takes_the_tensor_cores_with_a_k_major_b_only() {
    let out = emit_cuda(&ok(&i8_dot("trans(y)"))).source;
    assert!(out.contains("m16n8k32.row.col.s32.s8.s8.s32"), "{out}");
    assert!(out.contains("fuse_mma_s8(") && out.contains("read by its dot as K-major B"), "{out}");
    assert!(out.contains("int fuse_c[FUSE_EPT") || out.contains("int t"), "{out}");
    // A [K, N] i8 B has no byte ldmatrix.trans: the general fallback.
    let out = emit_cuda(&ok(&i8_dot("y"))).source;
    assert!(out.contains("the general fallback") && !out.contains("fuse_mma_s8("), "{out}");
}

/// On sm_90a with a warpgroup, the i8 `dot` of a K-major B takes wgmma's k32 s8 form (both
/// operands K-major); on fewer warps, mma.sync.
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn i8_takes_wgmma_on_sm90a_with_a_warpgroup() {
    require_nvrtc();
    let k = ok(&i8_dot("trans(y)"));
    let emitted = emit_cuda(&k);
    for (warps, wg) in [(4, true), (2, false)] {
        let mut full = format!("#define FUSE_NUM_WARPS {warps}\n");
        for s in &emitted.specializations {
            full.push_str(&format!("#define {} 1\n", s.macro_name(&k.params)));
        }
        full.push_str(&emitted.source);
        let ptx = compile(&full, "sm_90a").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&full)));
        assert_eq!(ptx.contains("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"), wg, "{warps} warps");
        assert_eq!(ptx.contains("mma.sync.aligned.m16n8k32"), !wg, "{warps} warps");
    }
}

/// `fuse_swz_f32` (the f32 staging layout), compiled for the host (`$CXX`, else `g++`; ignored
/// where the build found none, `fuse_cxx` in build.rs) and checked over the operand shapes a dot can have: a bijection onto the buffer's
/// even 16-bit units, 4 consecutive floats from a multiple of 4 in one 16-byte aligned chunk (what
/// `cp.async` and the staging stores write), 8 rows of a chunk on 8 distinct bank groups (one
/// `ldmatrix` matrix, A and K-major B), and a `[K, N]` B fragment load (rows `t`, columns `g`,
/// and rows `t + 4`) on 32 distinct banks.
#[test]
#[cfg_attr(not(fuse_cxx), ignore = "needs a C++17 compiler: set CXX, or install g++")]
fn f32_swizzle_is_a_bijection_without_bank_conflicts() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".to_string());
    let prelude = super::super::lower::tf32::PRELUDE;
    let start =
        prelude.find("__device__ __forceinline__ int fuse_swz_f32").expect("fuse_swz_f32 in the prelude");
    let end = start + prelude[start..].find("\n}\n").expect("the function's end") + 3;
    let program = format!(
        r#"#include <cstdio>
#include <set>
#define __device__
#define __forceinline__ inline
{}
static int fail(const char* what, int h, int w, int r, int c) {{
  std::printf("%s: [%d, %d] at (%d, %d)\n", what, h, w, r, c);
  return 1;
}}
int main() {{
  const int shapes[][2] = {{{{16, 16}}, {{32, 16}}, {{16, 32}}, {{64, 32}}, {{32, 64}}, {{128, 32}}, {{16, 128}}, {{64, 256}}, {{256, 64}}}};
  for (const auto& s : shapes) {{
    const int h = s[0], w = s[1];
    std::set<int> seen;
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c) {{
        const int u = fuse_swz_f32(r, c, w, h);
        if (u < 0 || u >= 2 * h * w || u % 2 != 0 || !seen.insert(u).second) return fail("not a bijection", h, w, r, c);
        if (c % 4 == 0 && u % 8 != 0) return fail("a chunk is not 16-byte aligned", h, w, r, c);
        if (c % 4 != 0 && u != fuse_swz_f32(r, c - 1, w, h) + 2) return fail("a chunk is not contiguous", h, w, r, c);
      }}
    for (int r0 = 0; r0 < h; r0 += 8)
      for (int c = 0; c < w; c += 4) {{
        std::set<int> groups;
        for (int i = 0; i < 8; ++i) groups.insert((fuse_swz_f32(r0 + i, c, w, h) * 2 / 16) % 8);
        if (groups.size() != 8) return fail("ldmatrix rows share a bank group", h, w, r0, c);
      }}
    for (int k0 = 0; k0 < h; k0 += 8)
      for (int c0 = 0; c0 < w; c0 += 8)
        for (int half = 0; half < 2; ++half) {{
          std::set<int> banks;
          for (int lane = 0; lane < 32; ++lane)
            banks.insert((fuse_swz_f32(k0 + lane % 4 + 4 * half, c0 + lane / 4, w, h) * 2 / 4) % 32);
          if (banks.size() != 32) return fail("a B fragment load has bank conflicts", h, w, k0, c0);
        }}
  }}
  std::printf("ok\n");
  return 0;
}}
"#,
        &prelude[start..end]
    );
    let dir = std::env::temp_dir().join(format!("fuse_swz_f32_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (cpp, exe) = (dir.join("swz.cpp"), dir.join("swz"));
    std::fs::write(&cpp, program).expect("the test program written");
    match std::process::Command::new(&cxx).args(["-std=c++17", "-O1", "-o"]).arg(&exe).arg(&cpp).output() {
        Err(e) => panic!("no host C++ compiler ({cxx}: {e}): set CXX, or install g++"),
        Ok(o) => assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)),
    }
    let run = std::process::Command::new(&exe).output().expect("the test program runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stdout));
}
