//! Every emitted kernel must compile with NVRTC (no GPU needed) for sm_80 and sm_90 under many
//! `#define` sets. Where the build found no NVRTC library the tests are ignored, with the reason;
//! under CI (`CI=true`) they run, and a missing library is a failure.
use super::*;

/// (BLOCK, R, FUSE_NUM_WARPS): small and large tiles, power-of-two and odd warp counts.
const CONFIGS: &[(u32, u32, u32)] = &[
    (32, 64, 1),
    (128, 2, 4),
    (1024, 8, 4),
    (4096, 1024, 8),
    (256, 16, 16),
    (64, 4, 16),
    (2048, 32, 32),
    (512, 32, 3),
    (128, 4, 7),
];
const ARCHS: &[&str] = &["sm_80", "sm_90", "sm_90a"];

/// Panics, saying what to install, where NVRTC does not load. The tests that call it are ignored
/// where the build found no NVRTC (`fuse_nvrtc`, build.rs), so they get here without one only
/// under CI or when run with `--include-ignored`.
pub(super) fn require_nvrtc() {
    // cudarc panics when the library is missing; probe first.
    assert!(
        unsafe { cudarc::nvrtc::sys::is_culib_present() },
        "NVRTC (libnvrtc.so) not found on the loader path: `python3 -m pip install nvidia-cuda-nvrtc` and put \
         site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH"
    );
}

pub(super) fn defines(
    k: &Kernel,
    specs: &[Specialization],
    block: u32,
    r: u32,
    warps: u32,
    spec_value: u32,
) -> String {
    let mut d = String::new();
    for c in &k.consts {
        d.push_str(&format!("#define {c} {}\n", if c == "BLOCK" { block } else { r }));
    }
    d.push_str(&format!("#define FUSE_NUM_WARPS {warps}\n"));
    for s in specs {
        d.push_str(&format!("#define {} {spec_value}\n", s.macro_name(&k.params)));
    }
    d
}

pub(super) fn compile(src: &str, arch: &str) -> Result<String, String> {
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(src, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(log.to_string_lossy().into_owned()),
        Err(e) => Err(format!("{e:?}")),
    }
}

pub(super) fn numbered(src: &str) -> String {
    src.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}

#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_nvrtc_compiles_every_kernel() {
    require_nvrtc();
    let mut jobs: Vec<(String, String, &str)> = Vec::new();
    for k in all_kernels() {
        let out = emit_cuda(&k);
        for (ci, &(block, r, warps)) in CONFIGS.iter().enumerate() {
            for spec in [0, 1] {
                // Both archs on every other config keeps the run short; each config sees both values.
                for (ai, arch) in ARCHS.iter().enumerate() {
                    if (ci + spec as usize + ai) % 2 == 1 && ci > 1 {
                        continue;
                    }
                    // The op zoo takes seconds per compile: a few configs (odd warp count included).
                    if k.name == "everything" && ![1, 3, 7].contains(&ci) {
                        continue;
                    }
                    let src = defines(&k, &out.specializations, block, r, warps, spec) + &out.source;
                    let what = format!("{} BLOCK={block} R={r} warps={warps} specs={spec} {arch}", k.name);
                    jobs.push((what, src, arch));
                }
            }
        }
    }
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((what, src, arch)) = jobs.get(i) else { break };
                if let Err(log) = compile(src, arch) {
                    failures.lock().unwrap().push(format!("== {what}\n{log}\n{}", numbered(src)));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} compiles failed; first:\n{}",
        failures.len(),
        jobs.len(),
        failures[0]
    );
    eprintln!("{} NVRTC compiles ok", jobs.len());
}

#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_nvrtc_ptx_uses_vector_access() {
    require_nvrtc();
    let k = add_mul(DType::F32);
    let out = emit_cuda(&k);
    let ptx = |spec: u32| {
        let src = defines(&k, &out.specializations, 1024, 1, 4, spec) + &out.source;
        compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&src)))
    };
    let v = ptx(1);
    assert!(
        v.contains("ld.global.nc.v4.u32")
            || v.contains("ld.global.nc.v4.f32")
            || v.contains("ld.global.nc.v4.b32"),
        "{v}"
    );
    assert!(v.contains("st.global.v4"), "{v}");
    let s = ptx(0);
    assert!(!s.contains(".v4"), "unaligned pointers: scalar accesses only\n{s}");
    assert!(s.contains("ld.global.nc.f32"), "{s}");

    // f16: 8 halves per 16-byte access.
    let k = add_mul(DType::F16);
    let out = emit_cuda(&k);
    let src = defines(&k, &out.specializations, 2048, 1, 4, 1) + &out.source;
    let h = compile(&src, "sm_80").unwrap_or_else(|log| panic!("{log}"));
    assert!(h.contains("ld.global.nc.v4.u32") && h.contains("st.global.v4.u32"), "{h}");

    // No local memory (register arrays stay in registers) for the seed kernels.
    for k in [softmax(), layernorm_f16(), layernorm_wide(), bias_gelu_dropout(DType::F32)] {
        let out = emit_cuda(&k);
        let src = defines(&k, &out.specializations, 1024, 1, 4, 1) + &out.source;
        let p = compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}"));
        assert!(!p.contains(".local"), "{}: local memory\n{p}", k.name);
        assert!(p.contains(".v4"), "{}: vector access\n{p}", k.name);
    }
}

#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_nvrtc_dropout_philox_once_per_four() {
    require_nvrtc();
    let k = bias_gelu_dropout(DType::F32);
    let out = emit_cuda(&k);
    let count = |spec: u32, block: u32| {
        let src = defines(&k, &out.specializations, block, 1, 4, spec) + &out.source;
        let p = compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}"));
        p.matches("mul.wide.u32").count()
    };
    // BLOCK 1024 / 128 threads = 8 elements per thread; 10 rounds x 2 wide multiplies per Philox call.
    // BLOCK 1024 on 4 warps: 8 elements per thread, VEC 4: two Philox calls. BLOCK 256: 2
    // elements, VEC 2 < 4: the per-element path, also two calls. (The first round's multiply by
    // the zero counter word may fold away, hence a range.)
    let (x4, each) = (count(1, 1024), count(1, 256));
    eprintln!("mul.wide.u32: {x4} (8 elements, x4 path), {each} (2 elements, per element)");
    assert!((36..=40).contains(&x4) && (36..=40).contains(&each), "{x4} {each}");
}

/// `rand16` in f32 (VEC 4): the four-of-eight path, one Philox call per four elements, so as
/// many as `rand` makes; the per-element fallback (VEC 2) makes one per element.
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_nvrtc_rand16_f32_philox_once_per_four() {
    require_nvrtc();
    let k = bias_gelu_dropout16(DType::F32);
    let out = emit_cuda(&k);
    let count = |spec: u32, block: u32| {
        let src = defines(&k, &out.specializations, block, 1, 4, spec) + &out.source;
        let p = compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&src)));
        p.matches("mul.wide.u32").count()
    };
    // BLOCK 1024 on 4 warps: 8 elements per thread, VEC 4: two Philox calls (20 wide multiplies
    // each, less any the zero counter word folds away), whatever the specialisations. BLOCK 256:
    // 2 elements, VEC 2: per element, also two calls. BLOCK 2048: 16 elements, four calls.
    let (x4, x4_off, each, x16) = (count(1, 1024), count(0, 1024), count(1, 256), count(1, 2048));
    eprintln!(
        "mul.wide.u32: {x4} / {x4_off} (8 elements, four-of-eight), {each} (2, per element), {x16} (16)"
    );
    assert!((36..=40).contains(&x4) && (36..=40).contains(&x4_off), "{x4} {x4_off}");
    assert!((36..=40).contains(&each), "{each}");
    assert!((72..=80).contains(&x16), "{x16}");
}

/// A kernel whose `rand(..) > p` comparisons need four bounds: `p` before and after a
/// reassignment, `q` inside an `if` and after it.
fn rand_bounds_kernel() -> Kernel {
    crate::tests::ok(
        r#"
pub fn k<const BLOCK: usize>(x: *const f32, pp: *const f32, out: *mut f32, out2: *mut f32, seed: u64, flag: i32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let w = load(x + offs, m) * 2.0;
    let r = rand(seed, offs);
    let mut p = 0.25;
    let a = where_(r > p, 1.0, 0.0);
    p = 0.75;
    let b = where_(r > p, 2.0, 0.0);
    let q = load(pp);
    if flag > 0 {
        store(out2 + offs, where_(r > q, w, 0.0), m);
    }
    store(out + offs, a + b + where_(r > q, w, 0.0), m);
}"#,
    )
}

/// `rand(..) > p` reuses a bound only where it holds: not across a reassignment of `p`, and not out
/// of the block that declared it (the first gave the second test the old bound, the second left a
/// later use with an undeclared name).
#[test]
fn emit_rand_bounds_follow_each_p() {
    let k = rand_bounds_kernel();
    let src = emit_cuda(&k).source;
    let bounds = src.matches("const unsigned int fuse_lb").count();
    assert_eq!(bounds, 4, "one bound per comparison here (p twice, q in and after the if)\n{src}");
}

/// The kernel of [`emit_rand_bounds_follow_each_p`] compiles (every bound is declared where it is
/// used).
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_rand_bounds_compile_with_nvrtc() {
    require_nvrtc();
    let k = rand_bounds_kernel();
    let out = emit_cuda(&k);
    let full = defines(&k, &out.specializations, 1024, 1, 4, 1) + &out.source;
    compile(&full, "sm_90").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&full)));
}

/// `trans` of a `[R, BLOCK]` f32 tile goes through the scratch: 64 KiB at 128 x 128, 4 KiB at
/// 32 x 32.
fn transposing_kernel() -> Kernel {
    crate::tests::ok(
        "fn k<const BLOCK: usize, const R: usize>(x: *const f32, y: *mut f32) {
        let offs = arange(0, R).expand_dims(1) * BLOCK + arange(0, BLOCK).expand_dims(0);
        let t_offs = arange(0, BLOCK).expand_dims(1) * R + arange(0, R).expand_dims(0);
        store(y + t_offs, trans(load(x + offs)));
    }",
    )
}

#[test]
fn emit_scratch_defines_the_dynamic_shared_memory_size() {
    let out = emit_cuda(&transposing_kernel());
    assert!(
        out.source.contains("extern \"C\" __device__ const unsigned int fuse_dynamic_smem_bytes"),
        "{}",
        out.source
    );
}

#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn emit_scratch_past_48k_is_dynamic_shared_memory() {
    let k = transposing_kernel();
    require_nvrtc();
    let out = emit_cuda(&k);
    for (block, r, dynamic) in [(128, 128, true), (32, 32, false)] {
        let src = format!("{}{}", defines(&k, &out.specializations, block, r, 4, 1), out.source);
        let ptx = compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&src)));
        // The symbol always exists (0 for a static scratch); the scratch is dynamic only past 48 KiB.
        assert!(ptx.contains("fuse_dynamic_smem_bytes"), "{block}x{r}");
        assert_eq!(ptx.contains(".extern .shared"), dynamic, "{block}x{r}:\n{ptx}");
    }
}
