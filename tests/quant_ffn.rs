//! The `matmul_int8` and `ffn_sublayer` examples (fuse-kernels/) at sizes that are not multiples
//! of their blocks (every edge masked), on fresh random inputs into poisoned outputs
//! (tests/common/quant_ffn.rs): the int8 accumulator bit for bit against i64, the requantised int8
//! output against the float64 rounding rule (exactly where every f32 step is exact: the ties
//! case), the FFN sublayer in f16 and bf16 against float64 within its per-element bound; and an
//! NVRTC compile of their kernels (no GPU needed). Each body runs on the CPU interpreter at two
//! block configurations and on a GPU at every one, at larger sizes
//! (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU).
mod common;

use common::backend::{every_backend, nvrtc_only, per_backend};
use common::quant_ffn::*;
use common::{ffn_sublayer, matmul_int8, Rng};
use fuse::half::{bf16, f16};
use fuse::Device;
use fuse_testkit::harness;

/// On a GPU the configurations of an example's `CONFIGS` that its test runs: all of them, or the
/// indices listed in `FUSE_TEST_CONFIGS` (e.g. `4`: the benched int8 block, for a run under
/// compute-sanitizer that cannot afford every NVRTC compile). On the CPU the entries `cpu` of it.
fn configs<C: Copy>(d: &Device, all: &[C], cpu: [usize; 2]) -> Vec<C> {
    if !d.is_cuda() {
        return cpu.iter().map(|&i| all[i]).collect();
    }
    match std::env::var("FUSE_TEST_CONFIGS") {
        Ok(list) => {
            list.split(',').filter_map(|i| all.get(i.trim().parse::<usize>().ok()?).copied()).collect()
        }
        Err(_) => all.to_vec(),
    }
}

/// The int8 configurations: on the CPU one that steps K several times and one that takes it in one
/// step (other masks).
fn int8_configs(d: &Device) -> Vec<matmul_int8::Config> {
    configs(d, matmul_int8::CONFIGS, [4, 2])
}

/// (m, n, k): ragged in every dimension, one element, K below a tile, K of several tiles, exact
/// (on a GPU larger ones).
fn int8_sizes(d: &Device) -> &'static [(usize, usize, usize)] {
    per_backend(
        d,
        &[(77, 45, 100), (1, 1, 1), (16, 130, 7), (33, 17, 112), (64, 64, 64)],
        &[(300, 200, 100), (129, 257, 192), (1000, 33, 70), (1, 1, 1), (16, 130, 7)],
    )
}

fn matmul_int8_accumulator_is_exact(d: &Device) {
    let mut rng = Rng::fresh("matmul_int8_accumulator_is_exact");
    for cfg in int8_configs(d) {
        for &size in int8_sizes(d) {
            check_int8_accumulator(d, &mut rng, cfg, size);
        }
        println!("matmul_int8 {cfg:?} on {}: {:?}", d.description(), fuse::dot_path("matmul_int8"));
    }
}

/// Random scales with and without bias (about 1 % of the outputs saturate), and where K is 16 or
/// more (so that ties occur) the ties case exactly.
fn matmul_int8_requantises_by_the_rule(d: &Device) {
    let mut rng = Rng::fresh("matmul_int8_requantises_by_the_rule");
    let (mut saturated, mut ties, mut total) = (0, 0, 0);
    for cfg in int8_configs(d) {
        for &size in int8_sizes(d) {
            for scales in [Scales::Random { bias: false }, Scales::Random { bias: true }] {
                let v = check_int8_requant(d, &mut rng, cfg, size, scales);
                saturated += v.saturated;
                total += v.exact + v.took_other;
            }
            if size.2 >= 16 {
                ties += check_int8_requant(d, &mut rng, cfg, size, Scales::Ties).ties;
            }
        }
    }
    println!("{total} outputs: {saturated} saturated; {ties} exact ties in the ties cases");
    assert!(saturated > 0 && saturated < total / 10, "the scales must saturate a few outputs");
}

/// One FFN sublayer kernel (LayerNorm statistics, normalised operand, bias + GELU + residual)
/// against float64, at `m x d` sizes from one element to rows wider than a block.
fn ffn_case<T: common::Elem + fuse::Half>(d: &Device, test: &str) {
    let mut rng = Rng::fresh(test);
    let sizes: &[(usize, usize)] = per_backend(
        d,
        &[(70, 72), (33, 130), (1, 1), (5, 17), (64, 64)],
        &[(300, 200), (129, 264), (70, 1000), (1, 1), (5, 17)],
    );
    for cfg in configs(d, ffn_sublayer::CONFIGS, [4, 2]) {
        for &size in sizes {
            check_ffn::<T>(d, &mut rng, cfg, size);
        }
    }
}

fn ffn_sublayer_f16(d: &Device) {
    ffn_case::<f16>(d, "ffn_sublayer_f16");
}

fn ffn_sublayer_bf16(d: &Device) {
    ffn_case::<bf16>(d, "ffn_sublayer_bf16");
}

/// The `matmul_int8` and `ffn_sublayer` kernels (no emitted-CUDA snapshot: tests/emitted_cuda.rs
/// keeps one of `matmul_int8` only) compile with NVRTC (no GPU needed) for sm_80 and sm_90, with
/// the launch-time specialisations on (the proven, unchecked paths) and off (the checked ones):
/// the variants of `common::quant_ffn::specs`, each timed.
fn quant_ffn_kernels_compile_with_nvrtc() {
    common::compile_each(common::quant_ffn::specs());
}

fn main() {
    let mut trials = nvrtc_only![quant_ffn_kernels_compile_with_nvrtc];
    trials.extend(every_backend![
        matmul_int8_accumulator_is_exact,
        matmul_int8_requantises_by_the_rule,
        ffn_sublayer_f16,
        ffn_sublayer_bf16,
    ]);
    harness::run(trials)
}
