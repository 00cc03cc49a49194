//! The `attention` example (fuse-kernels/src/attention.rs) on the CPU interpreter against float64:
//! causal and not, grouped-query heads, dropout, sequence lengths that are not multiples of the
//! blocks, f16 and bf16 (tests/common/attention_checks.rs; `tests/gpu_attention.rs` runs the same
//! checks on a GPU at the GPU block sizes).
mod common;

use common::attention::{Shape, CONFIGS};
use common::attention_checks::check_attention;
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;

fn cases<T: common::Elem + fuse::Half>(test: &str) {
    let d = Device::cpu();
    let mut rng = Rng::fresh(test);
    let small = CONFIGS[CONFIGS.len() - 1];
    for s in [
        Shape { batch: 2, heads: 4, kv_heads: 2, n: 37, d: 16 },
        Shape { batch: 1, heads: 2, kv_heads: 1, n: 33, d: 32 },
        Shape { batch: 1, heads: 1, kv_heads: 1, n: 1, d: 16 },
    ] {
        for causal in [false, true] {
            for p_drop in [0.0, 0.3] {
                check_attention::<T>(&d, &mut rng, small, s, causal, p_drop);
            }
        }
    }
}

#[test]
fn attention_f16() {
    cases::<f16>("attention_f16");
}

#[test]
fn attention_bf16() {
    cases::<bf16>("attention_bf16");
}

/// Bad launches are errors, not panics.
#[test]
fn attention_rejects_bad_launches() {
    let d = Device::cpu();
    let s = Shape { batch: 1, heads: 3, kv_heads: 2, n: 16, d: 16 };
    let buf = d.upload(&vec![f16::ZERO; 3 * 16 * 16]).unwrap();
    let mut o = d.upload(&vec![f16::ZERO; 3 * 16 * 16]).unwrap();
    let mut lse = d.upload(&vec![0f32; 3 * 16]).unwrap();
    let opt = common::attention::Options { scale: 0.25, causal: false, p_drop: 0.0, seed: 0 };
    let err =
        common::attention::launch(&d, CONFIGS[CONFIGS.len() - 1], s, &buf, &buf, &buf, &mut o, &mut lse, opt)
            .unwrap_err();
    assert!(err.to_string().contains("not a multiple"), "{err}");
    let s = Shape { kv_heads: 3, ..s };
    let bad = common::attention::Options { p_drop: 1.0, ..opt };
    let err =
        common::attention::launch(&d, CONFIGS[CONFIGS.len() - 1], s, &buf, &buf, &buf, &mut o, &mut lse, bad)
            .unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
    let s = Shape { d: 48, ..s };
    let err =
        common::attention::launch(&d, CONFIGS[0], s, &buf, &buf, &buf, &mut o, &mut lse, opt).unwrap_err();
    assert!(err.to_string().contains("not one this example"), "{err}");
}

/// A launch whose sequence length is a multiple of the blocks runs every load and store without
/// its bounds check and its key masks as constants (the launch-time proofs), causal or not; a
/// ragged one keeps the checks of the accesses that can reach past the end.
#[test]
fn divisible_launches_are_proven_in_bounds() {
    use fuse::{KernelArg, LaunchConfig};
    let d = Device::cpu();
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
            let inb = spec.proven_in_bounds(&d, config, &consts, &args).unwrap();
            let all_true = spec.proven_all_true(&d, config, &consts, &args).unwrap();
            println!("n {n} causal {causal}: in bounds {inb:?}, all true {all_true:?}");
            assert_eq!(inb.iter().all(|&p| p), proven, "n {n} causal {causal}: {inb:?}");
            if proven {
                assert!(all_true.iter().filter(|&&t| t).count() >= 2, "n {n} causal {causal}: {all_true:?}");
            }
        }
    }
}
