//! The `attention` example (fuse-kernels/src/attention.rs) against float64
//! (tests/common/attention_checks.rs): causal and not, grouped-query heads, dropout, sequence
//! lengths that are not multiples of the blocks, f16 and bf16; bad launches, the launch-time
//! proofs of divisible ones, and an NVRTC compile of the kernel (no GPU needed). Each body runs on
//! the CPU interpreter (its small block configuration, head dims 16 and 32) and on a GPU (every
//! GPU configuration, head dims 64 and 128, longer sequences) (tests/common/backend.rs:
//! `name/cpu`, `name/gpu`, the latter ignored without a GPU).
mod common;

use common::attention::{Config, Shape, CONFIGS};
use common::attention_checks::{check_attention, specs};
use common::backend::{every_backend, nvrtc_only, per_backend};
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;
use fuse_testkit::harness;

/// The shapes: grouped-query heads at a sequence length past several blocks, grouped-query heads
/// at one just past a block, one token. On the CPU at head dims 16 and 32, on a GPU at `dim`.
fn shapes(d: &Device, dim: usize) -> [Shape; 3] {
    per_backend(
        d,
        [
            Shape { batch: 2, heads: 4, kv_heads: 2, n: 37, d: 16 },
            Shape { batch: 1, heads: 2, kv_heads: 1, n: 33, d: 32 },
            Shape { batch: 1, heads: 1, kv_heads: 1, n: 1, d: 16 },
        ],
        [
            Shape { batch: 2, heads: 4, kv_heads: 2, n: 300, d: dim },
            Shape { batch: 1, heads: 2, kv_heads: 1, n: 129, d: dim },
            Shape { batch: 1, heads: 1, kv_heads: 1, n: 1, d: dim },
        ],
    )
}

/// Every shape at `cfg`, causal and not, without and with dropout.
fn run_config<T: common::Elem + fuse::Half>(d: &Device, rng: &mut Rng, cfg: Config, dim: usize) {
    for s in shapes(d, dim) {
        for causal in [false, true] {
            for p_drop in [0.0, per_backend(d, 0.3, 0.25)] {
                check_attention::<T>(d, rng, cfg, s, causal, p_drop);
            }
        }
    }
}

/// On a GPU the default configuration (128 x 64 blocks, 4 warps) at head dims 64 and 128, then
/// `after_default`, then every other GPU configuration (8 warps, 128 x 128, 64-row blocks,
/// 32-column key blocks); on the CPU the small configuration (`CONFIGS`' last).
fn configurations<T: common::Elem + fuse::Half>(d: &Device, rng: &mut Rng, after_default: impl Fn(&Device)) {
    let last = CONFIGS.len() - 1;
    if !d.is_cuda() {
        return run_config::<T>(d, rng, CONFIGS[last], 0);
    }
    run_config::<T>(d, rng, CONFIGS[0], 64);
    run_config::<T>(d, rng, CONFIGS[0], 128);
    after_default(d);
    for (i, &cfg) in CONFIGS.iter().enumerate().take(last).skip(1) {
        run_config::<T>(d, rng, cfg, if i % 2 == 0 { 64 } else { 128 });
    }
}

fn attention_f16(d: &Device) {
    let mut rng = Rng::fresh("attention_f16");
    configurations::<f16>(d, &mut rng, |_| ());
}

/// As `attention_f16`; after the default configuration on a GPU, the keys and values (boxes of a
/// [heads, n, d] tensor) must have been copied with TMA on sm_90a (unless FUSE_TMA=0 or
/// FUSE_MMA_SYNC=1), the kv head as the map's third coordinate.
fn attention_bf16(d: &Device) {
    let mut rng = Rng::fresh("attention_bf16");
    configurations::<bf16>(d, &mut rng, |gpu| {
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
    });
}

/// Bad launches are errors, not panics.
fn attention_rejects_bad_launches(d: &Device) {
    let s = Shape { batch: 1, heads: 3, kv_heads: 2, n: 16, d: 16 };
    let buf = d.upload(&vec![f16::ZERO; 3 * 16 * 16]).unwrap();
    let mut o = d.upload(&vec![f16::ZERO; 3 * 16 * 16]).unwrap();
    let mut lse = d.upload(&[0f32; 3 * 16]).unwrap();
    let opt = common::attention::Options { scale: 0.25, causal: false, p_drop: 0.0, seed: 0 };
    let last = CONFIGS[CONFIGS.len() - 1];
    let err = common::attention::launch(d, last, s, &buf, &buf, &buf, &mut o, &mut lse, opt).unwrap_err();
    assert!(err.to_string().contains("not a multiple"), "{err}");
    let s = Shape { kv_heads: 3, ..s };
    let bad = common::attention::Options { p_drop: 1.0, ..opt };
    let err = common::attention::launch(d, last, s, &buf, &buf, &buf, &mut o, &mut lse, bad).unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
    let s = Shape { d: 48, ..s };
    let err =
        common::attention::launch(d, CONFIGS[0], s, &buf, &buf, &buf, &mut o, &mut lse, opt).unwrap_err();
    assert!(err.to_string().contains("not one this example"), "{err}");
}

/// A launch whose sequence length is a multiple of the blocks runs every load and store without
/// its bounds check and its key masks as constants (the launch-time proofs), causal or not; a
/// ragged one keeps the checks of the accesses that can reach past the end.
fn divisible_launches_are_proven_in_bounds(d: &Device) {
    use fuse::{KernelArg, LaunchConfig};
    let cfg = CONFIGS[0];
    for (n, proven) in [(256usize, true), (200, false)] {
        let (heads, dim) = (2usize, 64usize);
        let len = heads * n * dim;
        let x = d.upload(&vec![f16::ZERO; len]).unwrap();
        let mut o = d.upload(&vec![f16::ZERO; len]).unwrap();
        let mut lse = d.upload(&vec![0f32; heads * n]).unwrap();
        for causal in [0, 1] {
            let args: Vec<KernelArg<'_>> = vec![
                (&x).into(),
                (&x).into(),
                (&x).into(),
                (&mut o).into(),
                (&mut lse).into(),
                KernelArg::I32(n as i32),
                KernelArg::I32(heads as i32),
                KernelArg::I32(heads as i32),
                KernelArg::F32(0.18),
                KernelArg::I32(causal),
                KernelArg::F32(0.0),
                KernelArg::U64(7),
            ];
            let config = LaunchConfig::new(((n.div_ceil(cfg.bm)) as u32, heads as u32)).num_warps(cfg.warps);
            let consts = [cfg.bm as u64, cfg.bn as u64, dim as u64];
            let spec = &common::attention::attention::f16::SPEC;
            let inb = spec.proven_in_bounds(d, config, &consts, &args).unwrap();
            let all_true = spec.proven_all_true(d, config, &consts, &args).unwrap();
            println!("n {n} causal {causal}: in bounds {inb:?}, all true {all_true:?}");
            assert_eq!(inb.iter().all(|&p| p), proven, "n {n} causal {causal}: {inb:?}");
            if proven {
                assert!(all_true.iter().filter(|&&t| t).count() >= 2, "n {n} causal {causal}: {all_true:?}");
            }
        }
    }
}

/// The kernel compiles with NVRTC for sm_80, sm_90 and sm_90a, specialisations on and off.
fn attention_compiles_with_nvrtc() {
    common::compile_each(specs());
}

fn main() {
    let mut trials = every_backend![
        attention_f16,
        attention_bf16,
        attention_rejects_bad_launches,
        divisible_launches_are_proven_in_bounds,
    ];
    trials.extend(nvrtc_only![attention_compiles_with_nvrtc]);
    harness::run(trials)
}
