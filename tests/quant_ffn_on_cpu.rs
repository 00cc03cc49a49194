//! The `matmul_int8` and `ffn_sublayer` examples (fuse-kernels/) on the CPU interpreter, at
//! sizes that are not multiples of their blocks (every edge masked), on fresh random inputs into
//! poisoned outputs: the int8 accumulator bit for bit against i64, the requantised int8 output
//! against the float64 rounding rule (exactly where every f32 step is exact: the ties case), the
//! FFN sublayer in f16 and bf16 against float64 within its per-element bound.
//! `tests/gpu_dot.rs` runs the same checks on a GPU.
mod common;

use common::quant_ffn::*;
use common::{ffn_sublayer, matmul_int8, Rng};
use fuse::half::{bf16, f16};
use fuse::Device;

/// (m, n, k): ragged in every dimension, one element, K below a tile, K of several tiles, exact.
const INT8_SIZES: &[(usize, usize, usize)] =
    &[(77, 45, 100), (1, 1, 1), (16, 130, 7), (33, 17, 112), (64, 64, 64)];

/// The CPU's configuration (K in several steps) and a GPU one (K in one step; other masks).
fn int8_configs() -> [matmul_int8::Config; 2] {
    [matmul_int8::CONFIGS[4], matmul_int8::CONFIGS[2]]
}

#[test]
fn matmul_int8_accumulator_is_exact() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("matmul_int8_accumulator_is_exact");
    for cfg in int8_configs() {
        for &size in INT8_SIZES {
            check_int8_accumulator(&d, &mut rng, cfg, size);
        }
    }
}

#[test]
fn matmul_int8_requantises_by_the_rule() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("matmul_int8_requantises_by_the_rule");
    let (mut saturated, mut ties, mut total) = (0, 0, 0);
    for cfg in int8_configs() {
        for &size in INT8_SIZES {
            for scales in [Scales::Random { bias: false }, Scales::Random { bias: true }] {
                let v = check_int8_requant(&d, &mut rng, cfg, size, scales);
                saturated += v.saturated;
                total += v.exact + v.took_other;
            }
            if size.2 >= 16 {
                ties += check_int8_requant(&d, &mut rng, cfg, size, Scales::Ties).ties;
            }
        }
    }
    println!("{total} outputs: {saturated} saturated; {ties} exact ties in the ties cases");
    assert!(saturated > 0 && saturated < total / 10, "the scales must saturate a few outputs");
}

const FFN_SIZES: &[(usize, usize)] = &[(70, 72), (33, 130), (1, 1), (5, 17), (64, 64)];

fn ffn_case<T: common::Elem + fuse::Half>(test: &str) {
    let d = Device::cpu();
    let mut rng = Rng::fresh(test);
    for cfg in [ffn_sublayer::CONFIGS[4], ffn_sublayer::CONFIGS[2]] {
        for &size in FFN_SIZES {
            check_ffn::<T>(&d, &mut rng, cfg, size);
        }
    }
}

#[test]
fn ffn_sublayer_f16() {
    ffn_case::<f16>("ffn_sublayer_f16");
}

#[test]
fn ffn_sublayer_bf16() {
    ffn_case::<bf16>("ffn_sublayer_bf16");
}
