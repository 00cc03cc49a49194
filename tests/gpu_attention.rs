//! The `attention` example on a GPU (tests/common/attention_checks.rs): every block configuration,
//! head dims 64 and 128, causal and not, grouped-query heads, dropout, sequence lengths that are not
//! multiples of the blocks, f16 and bf16, against float64; and an NVRTC compile of the kernel for
//! sm_80 and sm_90 (no GPU needed). harness = false (fuse_testkit::harness): without
//! a GPU the GPU tests are reported as ignored, with the reason; without NVRTC the compile test too
//! (under CI=true it fails).
mod common;
use fuse_testkit::harness;

use common::attention::{Config, Shape, CONFIGS};
use common::attention_checks::{check_attention, specs};
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;

fn shapes(d: usize) -> [Shape; 3] {
    [
        Shape { batch: 2, heads: 4, kv_heads: 2, n: 300, d },
        Shape { batch: 1, heads: 2, kv_heads: 1, n: 129, d },
        Shape { batch: 1, heads: 1, kv_heads: 1, n: 1, d },
    ]
}

fn run_config(gpu: &Device, rng: &mut Rng, cfg: Config, d: usize) {
    for s in shapes(d) {
        for causal in [false, true] {
            for p_drop in [0.0, 0.25] {
                check_attention::<f16>(gpu, rng, cfg, s, causal, p_drop);
                check_attention::<bf16>(gpu, rng, cfg, s, causal, p_drop);
            }
        }
    }
}

/// The default configuration (128 x 64 blocks, 4 warps) at both head dims.
fn attention_default_config(gpu: &Device) {
    let mut rng = Rng::fresh("gpu attention default");
    run_config(gpu, &mut rng, CONFIGS[0], 64);
    run_config(gpu, &mut rng, CONFIGS[0], 128);
    // Keys and values are boxes of a [heads, n, d] tensor: on sm_90a (unless FUSE_TMA=0 or
    // FUSE_MMA_SYNC=1) both are copied with TMA, the kv head as the map's third coordinate.
    let env = |k: &str| std::env::var(k).ok();
    let tma = gpu.description().contains("sm_90")
        && env("FUSE_MMA_SYNC").as_deref() != Some("1")
        && env("FUSE_TMA").as_deref() != Some("0");
    let got = fuse::tma_loads("attention_bf16");
    assert_eq!(
        got,
        Some(if tma { 2 } else { 0 }),
        "attention_bf16's loads through TMA on {}",
        gpu.description()
    );
    println!("attention_bf16 on {}: {got:?} loads through TMA", gpu.description());
}

/// Every other GPU configuration (8 warps, 128 x 128, 64-row blocks, 32-column key blocks).
fn attention_other_configs(gpu: &Device) {
    let mut rng = Rng::fresh("gpu attention configs");
    for (i, &cfg) in CONFIGS.iter().enumerate().take(CONFIGS.len() - 1).skip(1) {
        run_config(gpu, &mut rng, cfg, if i % 2 == 0 { 64 } else { 128 });
    }
}

/// The kernel compiles with NVRTC for sm_80, sm_90 and sm_90a, specialisations on and off.
fn attention_compiles_with_nvrtc() {
    for (spec, consts, warps, arch, all) in specs() {
        let values = vec![all; spec.specializations().len()];
        let what =
            format!("{} {consts:?} with {warps} warps for {arch} (specialisations {all})", spec.name());
        if let Err(e) = spec.compile_for_arch_with(arch, &consts, warps, &values) {
            panic!("{what} failed:\n{e}");
        }
    }
}

fn main() {
    let mut trials = harness::gpu_trials(vec![
        ("attention_default_config", attention_default_config),
        ("attention_other_configs", attention_other_configs),
    ]);
    trials.extend(harness::nvrtc_trials(vec![(
        "attention_compiles_with_nvrtc",
        attention_compiles_with_nvrtc,
    )]));
    harness::run(trials)
}
