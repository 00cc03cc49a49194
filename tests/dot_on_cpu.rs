//! `dot` on the CPU interpreter against float64 (f32 inputs rounded to TF32 by the reference) on
//! fresh random inputs, NaN-poisoned outputs: the Triton-style tiled matmul at sizes that are not
//! multiples of its tiles (every edge masked), in f16, bf16, f32 and i8, and a single product with
//! an accumulator, in method form and of a converted operand. `tests/gpu_dot.rs` runs the same
//! checks on a GPU.
mod common;

use common::dot::*;
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;

/// (m, n, k): ragged in every dimension, exact tiles, one element, K below a tile, K of 3 tiles.
const SIZES: &[(usize, usize, usize)] = &[(77, 45, 100), (64, 64, 64), (1, 1, 1), (16, 130, 7), (33, 17, 48)];

fn matmul_case<T: DotElem>(test: &str) {
    let d = Device::cpu();
    let mut rng = Rng::fresh(test);
    for &size in SIZES {
        check_matmul::<T>(&d, &mut rng, size);
    }
}

#[test]
fn matmul_f16() {
    matmul_case::<f16>("matmul_f16");
}

#[test]
fn matmul_bf16() {
    matmul_case::<bf16>("matmul_bf16");
}

#[test]
fn matmul_f32_as_tf32() {
    matmul_case::<f32>("matmul_f32_as_tf32");
}

#[test]
fn matmul_i8() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("matmul_i8");
    for &size in SIZES {
        check_matmul_i8(&d, &mut rng, size);
    }
}

#[test]
fn accumulator_method_form_and_converted_operands() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("accumulator_method_form_and_converted_operands");
    check_forms::<f16>(&d, &mut rng, None);
    check_forms::<bf16>(&d, &mut rng, None);
    check_forms::<f32>(&d, &mut rng, None);
}

#[test]
fn reductions_of_a_dot_result() {
    let mut rng = common::Rng::fresh("cpu dot reductions");
    common::dot::check_reductions::<fuse::half::f16>(&fuse::Device::cpu(), &mut rng, 4);
    common::dot::check_reductions::<fuse::half::bf16>(&fuse::Device::cpu(), &mut rng, 4);
    common::dot::check_reductions::<f32>(&fuse::Device::cpu(), &mut rng, 4);
}

/// The exact-sum check of f32 inputs' TF32 rounding (run bit for bit against the GPU by
/// `tests/gpu_dot.rs`) holds on the interpreter, and tells its rounding from ties-to-even and
/// truncation.
#[test]
fn tf32_rounding_of_exact_sums() {
    let mut rng = Rng::fresh("cpu tf32 rounding");
    check_tf32_rounding::<32, 32, 16>(&Device::cpu(), &mut rng, (45, 37, 70), 4, 1);
}

/// The pipelined K loop copies with `cp.async` without a per-chunk check only where the runtime
/// proves, before the launch, every access in bounds and every mask true: it must for a matmul
/// whose sizes are multiples of the blocks (as the benchmarks' are), and must not prove the masks
/// where a dimension is ragged.
#[test]
fn divisible_matmuls_are_proven_in_bounds_with_every_mask_true() {
    use fuse::{KernelArg, LaunchConfig};
    let d = Device::cpu();
    let proofs = |(m, n, k): (usize, usize, usize)| {
        let a = d.upload(&vec![f16::from_f32(0.5); m * k]).unwrap();
        let b = d.upload(&vec![f16::from_f32(0.5); k * n]).unwrap();
        let mut c = d.upload(&vec![0f32; m * n]).unwrap();
        let args: Vec<KernelArg<'_>> = vec![
            (&a).into(),
            (&b).into(),
            (&mut c).into(),
            KernelArg::I32(m as i32),
            KernelArg::I32(n as i32),
            KernelArg::I32(k as i32),
        ];
        let config = LaunchConfig::new(((m / 128) as u32, (n / 128) as u32));
        let spec = &matmul::f16::SPEC;
        let consts = [128, 128, 32];
        (
            spec.proven_in_bounds(&d, config, &consts, &args).unwrap(),
            spec.proven_all_true(&d, config, &consts, &args).unwrap(),
        )
    };
    let (inb, all_true) = proofs((512, 256, 384));
    assert!(inb.iter().all(|&p| p), "accesses not proven in bounds: {inb:?}");
    assert!(all_true.iter().all(|&p| p), "masks not proven true: {all_true:?}");
    let (_, all_true) = proofs((512, 256, 392));
    assert!(!all_true.iter().all(|&p| p), "a ragged K cannot have every mask proven true");
}

/// `a @ w^T` with a K-major `w` (`dot(x, trans(y))`): ragged sizes, f16, bf16 and f32.
#[test]
fn matmul_with_a_k_major_b() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("matmul_nt");
    for size in [(45, 37, 70), (32, 32, 32), (1, 5, 3)] {
        check_nt::<f16>(&d, &mut rng, size, (32, 32), 1, 3);
        check_nt::<bf16>(&d, &mut rng, size, (32, 32), 1, 3);
        check_nt::<f32>(&d, &mut rng, size, (32, 32), 1, 3);
    }
    check_nt_once::<f16>(&d, &mut rng, 1);
    check_nt_once::<f32>(&d, &mut rng, 1);
}
