//! `dot` against float64 (f32 inputs rounded to TF32 by the reference) on fresh random inputs
//! into NaN-poisoned outputs (tests/common/dot.rs): the Triton-style tiled matmul at sizes that are
//! not multiples of its tiles (every edge masked) in f16, bf16, f32 and i8, a single product with
//! an accumulator, in method form and of a converted operand, reductions of a dot result, a
//! K-major B (`dot(x, trans(y))`), the TF32 rounding exactly, the launch-time proofs of a divisible
//! matmul, and the `matmul` example (f16/bf16 results stored from the accumulator through shared
//! memory, optionally with bias + GELU). Each body runs on the CPU interpreter and on a GPU
//! (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU), on a GPU at
//! larger sizes and several warp counts and stage counts. On a GPU f32 `dot` runs on TF32 tensor
//! cores (`mma.sync` m16n8k8), which sum in another order than the interpreter: it is checked
//! against float64 within f32 summation error like the half types, and its input rounding against
//! the interpreter bit for bit on data whose sums are exact in any order. The GPU-only bodies check
//! the tensor-core paths themselves: block shapes, warps and pipeline stages, and Hopper's
//! warpgroup path with TMA copies.
mod common;
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::matmul as matmul_example;

use common::backend::{every_backend, gpu_only, per_backend};
use common::dot::*;
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;
use fuse_testkit::harness;

/// (m, n, k) of the tiled matmul: ragged in every dimension, exact tiles, one element, K below a
/// tile, K of 3 tiles; on a GPU also a large one and a tall thin one.
fn sizes(d: &Device) -> &'static [(usize, usize, usize)] {
    per_backend(
        d,
        &[(77, 45, 100), (64, 64, 64), (1, 1, 1), (16, 130, 7), (33, 17, 48)],
        &[(512, 384, 256), (77, 45, 100), (1000, 33, 70), (1, 1, 1), (16, 130, 7), (64, 64, 64)],
    )
}

fn matmul_case<T: DotElem>(d: &Device, test: &str) {
    let mut rng = Rng::fresh(test);
    for &size in sizes(d) {
        check_matmul::<T>(d, &mut rng, size);
    }
}

fn matmul_f16(d: &Device) {
    matmul_case::<f16>(d, "matmul_f16");
}

fn matmul_bf16(d: &Device) {
    matmul_case::<bf16>(d, "matmul_bf16");
}

fn matmul_f32_as_tf32(d: &Device) {
    matmul_case::<f32>(d, "matmul_f32_as_tf32");
}

fn matmul_i8(d: &Device) {
    let mut rng = Rng::fresh("matmul_i8");
    for &size in sizes(d) {
        check_matmul_i8(d, &mut rng, size);
    }
}

/// `dot_forms` in f16, bf16 and f32; on a GPU from one warp (many output slots per thread) to 32
/// (more threads than the 512 outputs).
fn accumulator_method_form_and_converted_operands(d: &Device) {
    let mut rng = Rng::fresh("accumulator_method_form_and_converted_operands");
    let warps: &[Option<u32>] = per_backend(d, &[None], &[None, Some(1), Some(4), Some(32)]);
    for &w in warps {
        check_forms::<f16>(d, &mut rng, w);
        check_forms::<bf16>(d, &mut rng, w);
        check_forms::<f32>(d, &mut rng, w);
    }
}

/// The warp counts of the reductions: on a GPU 1 to 8.
fn reduction_warps(d: &Device) -> &'static [u32] {
    per_backend(d, &[4], &[1, 2, 4, 8])
}

/// A dot result (f16, bf16) reduced along its rows (from the tensor cores' layout) and its columns
/// (moved out of it first).
fn reductions_of_a_dot_result(d: &Device) {
    let mut rng = Rng::fresh("dot reductions");
    for &warps in reduction_warps(d) {
        check_reductions::<f16>(d, &mut rng, warps);
        check_reductions::<bf16>(d, &mut rng, warps);
    }
}

/// Row sums and column maxima of an f32 (TF32) dot result.
fn tf32_reductions_of_a_dot_result(d: &Device) {
    let mut rng = Rng::fresh("tf32 dot reductions");
    for &warps in reduction_warps(d) {
        check_reductions::<f32>(d, &mut rng, warps);
    }
}

/// f32 inputs are rounded to TF32 exactly as the reference rounds them (to nearest, ties away from
/// zero): on inputs full of ties whose sums are exact in any order, the result equals the float64
/// one bit for bit and tells this rounding from ties-to-even and truncation
/// (`check_tf32_rounding`); on a GPU also the interpreter's, at block shapes, warp counts and stage
/// counts of the pipelined and the plain paths.
fn tf32_rounding_of_exact_sums(d: &Device) {
    let mut rng = Rng::fresh("tf32 rounding");
    check_tf32_rounding::<32, 32, 16>(d, &mut rng, per_backend(d, (45, 37, 70), (96, 80, 72)), 4, 1);
    if d.is_cuda() {
        check_tf32_rounding::<64, 64, 32>(d, &mut rng, (130, 70, 333), 4, 3);
        check_tf32_rounding::<128, 128, 32>(d, &mut rng, (257, 129, 1000), 8, 2);
        check_tf32_rounding::<64, 64, 32>(d, &mut rng, (100, 200, 96), 1, 4);
    }
}

/// The pipelined K loop copies with `cp.async` without a per-chunk check only where the runtime
/// proves, before the launch, every access in bounds and every mask true: it must for a matmul
/// whose sizes are multiples of the blocks (as the benchmarks' are), and must not prove the masks
/// where a dimension is ragged.
fn divisible_matmuls_are_proven_in_bounds_with_every_mask_true(d: &Device) {
    use fuse::{KernelArg, LaunchConfig};
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
            spec.proven_in_bounds(d, config, &consts, &args).unwrap(),
            spec.proven_all_true(d, config, &consts, &args).unwrap(),
        )
    };
    let (inb, all_true) = proofs((512, 256, 384));
    assert!(inb.iter().all(|&p| p), "accesses not proven in bounds: {inb:?}");
    assert!(all_true.iter().all(|&p| p), "masks not proven true: {all_true:?}");
    let (_, all_true) = proofs((512, 256, 392));
    assert!(!all_true.iter().all(|&p| p), "a ragged K cannot have every mask proven true");
}

/// `a @ w^T` with a K-major `w` (`dot(x, trans(y))`, on a GPU read by ldmatrix without `.trans`)
/// in f16 and bf16, once outside a loop and in the K loop, pipelined and not (num_stages 1 vs 3 is
/// the same plan; the non-pipelined path is the `dot_forms` one), over block shapes, warps and
/// ragged sizes.
fn k_major_b_operands(d: &Device) {
    let mut rng = Rng::fresh("matmul_nt");
    for &warps in per_backend(d, &[1u32][..], &[1, 2, 4, 8]) {
        check_nt_once::<f16>(d, &mut rng, warps);
        check_nt_once::<bf16>(d, &mut rng, warps);
    }
    if d.is_cuda() {
        let cases = [
            ((130, 70, 1000), (64, 64), 4, 3),
            ((257, 129, 96), (128, 128), 4, 2),
            ((100, 200, 333), (64, 64), 1, 4),
            ((64, 64, 64), (32, 32), 8, 3),
        ];
        for (i, (size, block, warps, stages)) in cases.into_iter().enumerate() {
            if i % 2 == 0 {
                check_nt::<f16>(d, &mut rng, size, block, warps, stages);
            } else {
                check_nt::<bf16>(d, &mut rng, size, block, warps, stages);
            }
        }
    } else {
        for size in [(45, 37, 70), (32, 32, 32), (1, 5, 3)] {
            check_nt::<f16>(d, &mut rng, size, (32, 32), 1, 3);
            check_nt::<bf16>(d, &mut rng, size, (32, 32), 1, 3);
        }
    }
}

/// f32 `a @ w^T` with `w` K-major, once outside a loop and in the K loop; on a GPU pipelined and
/// not, over block shapes, warps and ragged sizes.
fn tf32_k_major_b_operands(d: &Device) {
    let mut rng = Rng::fresh("tf32 matmul_nt");
    for &warps in per_backend(d, &[1u32][..], &[1, 2, 4, 8]) {
        check_nt_once::<f32>(d, &mut rng, warps);
    }
    let cases: &[_] = per_backend(
        d,
        &[((45, 37, 70), (32, 32), 1, 3), ((32, 32, 32), (32, 32), 1, 3), ((1, 5, 3), (32, 32), 1, 3)],
        &[
            ((130, 70, 1000), (64, 64), 4, 3),
            ((257, 129, 96), (128, 128), 4, 2),
            ((100, 200, 333), (64, 64), 1, 4),
            ((64, 64, 64), (32, 32), 8, 3),
            ((300, 260, 250), (128, 128), 8, 4),
        ],
    );
    for &(size, block, warps, stages) in cases {
        check_nt::<f32>(d, &mut rng, size, block, warps, stages);
    }
}

/// The `matmul` example, f16 and bf16, plain and with bias + GELU: its half-precision result goes
/// from the accumulator through shared memory to 16-byte row runs (`emit_cuda/lower/coalesce.rs`);
/// ragged sizes mask rows and columns of those runs, aligned ones take the unchecked vector
/// stores. On a GPU at four block configurations (one warpgroup, two, the bench's 128x256x64, and
/// one warp on `mma.sync`'s grid), on the CPU at the last. Against float64 within the f32 sum's
/// error and one rounding.
fn matmul_example(d: &Device) {
    fn case<T: common::Elem + fuse::Half>(d: &Device, rng: &mut Rng, cfg: matmul_example::Config) {
        let sizes: &[_] =
            per_backend(d, &[(129, 257, 64), (16, 130, 7)], &[(129, 257, 64), (16, 130, 7), (256, 512, 128)]);
        for &(m, n, k) in sizes {
            for gelu in [false, true] {
                let (a, b, bias) = (rng.vec(m * k, 1.0), rng.vec(k * n, 1.0), rng.vec(n, 1.0));
                let (a, b, bias) = (T::from_f32s(&a), T::from_f32s(&b), T::from_f32s(&bias));
                let up = |v: &[T]| d.upload(v).unwrap();
                let mut c = d.upload(&T::from_f32s(&vec![f32::NAN; m * n])).unwrap();
                matmul_example::launch(d, cfg, &up(&a), &up(&b), &up(&bias), &mut c, (m, n, k), gelu)
                    .unwrap();
                let want = matmul_example::reference(
                    &T::to_f64s(&a),
                    &T::to_f64s(&b),
                    &T::to_f64s(&bias),
                    m,
                    n,
                    k,
                    gelu,
                    bias_gelu_dropout::erf64,
                );
                let what =
                    format!("matmul {} {m}x{n}x{k} gelu {gelu} {cfg:?} on {}", T::NAME, d.description());
                let got = T::to_f64s(&c.to_vec().unwrap());
                let (atol, rtol) = if T::NAME == "f16" { (2e-3, 2e-3) } else { (1e-2, 1e-2) };
                common::assert_close(&what, &got, &want, atol * (k as f64).sqrt(), rtol);
            }
        }
    }
    let mut rng = Rng::fresh("matmul example");
    let last = matmul_example::CONFIGS.len() - 1;
    for &i in per_backend(d, &[last][..], &[0, 10, 13, last]) {
        let cfg = matmul_example::CONFIGS[i];
        case::<f16>(d, &mut rng, cfg);
        case::<bf16>(d, &mut rng, cfg);
    }
}

/// f32 (TF32) matmul against float64 at the block shapes a matmul is tuned over, 1 to 8 warps,
/// pipelined over 1 (taken as 2) to 4 stages, ragged sizes (K not a multiple of 4: the per-lane
/// path into the stages); every kernel reports `mma.sync`, on sm_90 too (no TF32 `wgmma` here).
fn tf32_blocks_warps_and_stages(gpu: &Device) {
    let mut rng = Rng::fresh("gpu tf32 blocks");
    let sizes = [(300, 260, 1000), (257, 129, 96), (130, 70, 333), (1, 1, 1), (64, 64, 64)];
    for (i, &size) in sizes.iter().enumerate() {
        let s = 2 + i as u32 % 3;
        check_pipelined_block::<f32, 64, 64, 32>(gpu, &mut rng, size, [1, 2, 4, 8, 4][i], s);
        check_pipelined_block::<f32, 128, 128, 32>(gpu, &mut rng, size, 4 + 4 * (i as u32 % 2), s);
        check_pipelined_block::<f32, 128, 64, 16>(gpu, &mut rng, size, 4, 1 + i as u32 % 4);
        check_pipelined_block::<f32, 64, 128, 32>(gpu, &mut rng, size, 8, 4);
        check_pipelined_block::<f32, 32, 32, 16>(gpu, &mut rng, size, [1, 2, 4, 8, 2][i], 3);
    }
    let got = fuse::dot_path("matmul_f32");
    assert_eq!(got, Some(fuse::DotPath::MmaSync), "matmul_f32's tensor-core path on {}", gpu.description());
    println!("matmul_f32 on {}: {got:?}", gpu.description());
}

/// The pipelined K loop (cp.async into a ring of stages) over stage counts 1 (taken as 2) to 5
/// and 1 to 8 warps, at K from one partial block to 1000 (the ring wraps many times), with K a
/// multiple of 8 (16-byte copies) and not (the per-lane path into the stages). Each configuration
/// is a separate NVRTC compile per launch-time specialisation, so each runs two of the sizes.
fn pipelined_k_loops(gpu: &Device) {
    let mut rng = Rng::fresh("gpu pipelined");
    let sizes = [(130, 70, 1000), (64, 64, 24), (100, 200, 333), (257, 129, 96)];
    for (i, (stages, warps)) in [(1, 4), (2, 8), (3, 4), (3, 1), (4, 8), (5, 4)].into_iter().enumerate() {
        check_pipelined::<f16>(gpu, &mut rng, sizes[i % 4], warps, stages);
        check_pipelined::<bf16>(gpu, &mut rng, sizes[(i + 1) % 4], warps, stages);
    }
}

/// The warpgroup path (Hopper's `wgmma`, operands through shared-memory descriptors) at the block
/// shapes a matmul is tuned over, ragged sizes, pipelined over 2-4 stages; on an sm_90 device the
/// kernel must report that it took it (unless `FUSE_MMA_SYNC=1` forces `mma.sync`, which these
/// same checks then test at these shapes).
fn warpgroup_blocks(gpu: &Device) {
    let mut rng = Rng::fresh("gpu wgmma blocks");
    let sizes = [(300, 260, 1000), (128, 128, 64), (257, 129, 96), (1, 1, 1)];
    for (i, &size) in sizes.iter().enumerate() {
        check_pipelined_block::<f16, 128, 128, 32>(gpu, &mut rng, size, 4, 3);
        check_pipelined_block::<bf16, 128, 128, 64>(gpu, &mut rng, size, 8, 2 + i as u32 % 3);
        check_pipelined_block::<f16, 128, 256, 64>(gpu, &mut rng, size, 8, 3);
        check_pipelined_block::<bf16, 256, 128, 32>(gpu, &mut rng, size, 8, 4);
        check_pipelined_block::<f16, 64, 128, 64>(gpu, &mut rng, size, 4, 3);
    }
    let want = if gpu.description().contains("sm_90") && std::env::var("FUSE_MMA_SYNC").as_deref() != Ok("1")
    {
        fuse::DotPath::Wgmma
    } else {
        fuse::DotPath::MmaSync
    };
    for name in ["matmul_f16", "matmul_bf16"] {
        let got = fuse::dot_path(name);
        assert_eq!(got, Some(want), "{name}'s tensor-core path on {}", gpu.description());
        println!("{name} on {}: {got:?}", gpu.description());
    }
    // Rows of 16-byte multiples and aligned buffers: on the wgmma path both operands are copied
    // with TMA (unless FUSE_TMA=0); the ragged sizes above mix TMA and cp.async (n = 260, 129).
    check_pipelined_block::<f16, 128, 256, 64>(gpu, &mut rng, (300, 264, 200), 8, 4);
    let tma = want == fuse::DotPath::Wgmma && std::env::var("FUSE_TMA").as_deref() != Ok("0");
    let got = fuse::tma_loads("matmul_f16");
    assert_eq!(got, Some(if tma { 2 } else { 0 }), "matmul_f16's loads through TMA on {}", gpu.description());
    println!("matmul_f16 on {}: {got:?} loads through TMA", gpu.description());
}

fn main() {
    let mut trials = every_backend![
        matmul_f16,
        matmul_bf16,
        matmul_f32_as_tf32,
        matmul_i8,
        accumulator_method_form_and_converted_operands,
        reductions_of_a_dot_result,
        tf32_reductions_of_a_dot_result,
        tf32_rounding_of_exact_sums,
        divisible_matmuls_are_proven_in_bounds_with_every_mask_true,
        k_major_b_operands,
        tf32_k_major_b_operands,
        matmul_example,
    ];
    trials.extend(gpu_only![tf32_blocks_warps_and_stages, pipelined_k_loops, warpgroup_blocks]);
    harness::run(trials)
}
