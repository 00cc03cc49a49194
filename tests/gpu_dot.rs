//! `dot` on a GPU: the checks of `tests/dot_on_cpu.rs` (float64 references, NaN-poisoned outputs)
//! at larger sizes and several warp counts, and the general fallback lowering against the CPU
//! interpreter bit for bit (it sums in the IR's order, as the interpreter does).
//! The `matmul_int8` and `ffn_sublayer` examples' checks (tests/common/quant_ffn.rs) at larger
//! sizes and every block configuration, and an NVRTC compile of their kernels (no GPU needed).
//! harness = false (fuse-runtime/tests/common/harness.rs): without a GPU the tests are reported
//! as ignored, with the reason; without NVRTC the compile test too (under CI=true it fails).
mod common;
#[path = "../fuse-runtime/tests/common/harness.rs"]
mod harness;

use common::dot::*;
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;

const SIZES: &[(usize, usize, usize)] =
    &[(512, 384, 256), (77, 45, 100), (1000, 33, 70), (1, 1, 1), (16, 130, 7), (64, 64, 64)];

fn matmul_f16_bf16_f32(gpu: &Device) {
    let mut rng = Rng::fresh("gpu matmul");
    for &size in SIZES {
        check_matmul::<f16>(gpu, &mut rng, size);
        check_matmul::<bf16>(gpu, &mut rng, size);
        check_matmul::<f32>(gpu, &mut rng, size);
    }
}

fn matmul_i8(gpu: &Device) {
    let mut rng = Rng::fresh("gpu matmul_i8");
    for &size in SIZES {
        check_matmul_i8(gpu, &mut rng, size);
    }
}

fn accumulator_method_form_and_converted_operands(gpu: &Device) {
    let mut rng = Rng::fresh("gpu dot forms");
    // One warp (many output slots per thread) to 32 (more threads than the 512 outputs).
    for warps in [None, Some(1), Some(4), Some(32)] {
        check_forms::<f16>(gpu, &mut rng, warps);
        check_forms::<bf16>(gpu, &mut rng, warps);
        check_forms::<f32>(gpu, &mut rng, warps);
    }
}

/// The general fallback adds each output's products in the IR's order with unfused multiply and
/// add, as the interpreter does, so the two agree bit for bit. (A tensor-core lowering sums in
/// another order: this holds only where the fallback runs.)
fn fallback_matches_the_interpreter_bit_for_bit(gpu: &Device) {
    let mut rng = Rng::fresh("gpu dot bit for bit");
    let (m, n, k) = (96, 80, 72);
    let a = rng.vec(m * k, 1.0);
    let b = rng.vec(k * n, 1.0);
    let run = |d: &Device| {
        let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
        let mut c = d.upload(&vec![f32::NAN; m * n]).unwrap();
        let grid = (m.div_ceil(BM) as u32, n.div_ceil(BN) as u32);
        matmul::launch::<f32, BM, BN, BK>(d, grid, &ab, &bb, &mut c, m as i32, n as i32, k as i32).unwrap();
        c.to_vec().unwrap()
    };
    let (g, c) = (run(gpu), run(&Device::cpu()));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    assert_eq!(bits(&g), bits(&c), "GPU and CPU f32 (TF32) matmul differ");
}

/// A dot result reduced along its rows (from the tensor cores' layout) and its columns (moved out
/// of it first), at warp counts from 1 to 8.
fn reductions_of_a_dot_result(gpu: &Device) {
    let mut rng = Rng::fresh("gpu dot reductions");
    for warps in [1, 2, 4, 8] {
        check_reductions::<f16>(gpu, &mut rng, warps);
        check_reductions::<bf16>(gpu, &mut rng, warps);
    }
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
    let want = if gpu.description().contains("sm_90") && std::env::var("FUSE_MMA_SYNC").as_deref() != Ok("1") {
        fuse::DotPath::Wgmma
    } else {
        fuse::DotPath::MmaSync
    };
    for name in ["matmul_f16", "matmul_bf16"] {
        let got = fuse::dot_path(name);
        assert_eq!(got, Some(want), "{name}'s tensor-core path on {}", gpu.description());
        println!("{name} on {}: {got:?}", gpu.description());
    }
}

/// `a @ w^T` with `w` K-major (`dot(x, trans(y))`, read by ldmatrix without `.trans`), pipelined
/// and not (num_stages 1 vs 3 is the same plan; the non-pipelined path is the `dot_forms` one),
/// over block shapes, warps and ragged sizes.
fn k_major_b_operands(gpu: &Device) {
    let mut rng = Rng::fresh("gpu matmul_nt");
    let cases = [((130, 70, 1000), (64, 64), 4, 3), ((257, 129, 96), (128, 128), 4, 2), ((100, 200, 333), (64, 64), 1, 4), ((64, 64, 64), (32, 32), 8, 3)];
    for warps in [1, 2, 4, 8] {
        check_nt_once::<f16>(gpu, &mut rng, warps);
        check_nt_once::<bf16>(gpu, &mut rng, warps);
    }
    for (i, (size, block, warps, stages)) in cases.into_iter().enumerate() {
        if i % 2 == 0 {
            check_nt::<f16>(gpu, &mut rng, size, block, warps, stages);
        } else {
            check_nt::<bf16>(gpu, &mut rng, size, block, warps, stages);
        }
    }
}

/// The `matmul_int8` example at every block configuration: the i32 accumulator bit for bit, the
/// requantised output by the float64 rule (random scales with and without bias; the ties case
/// exactly).
fn matmul_int8_example(gpu: &Device) {
    use common::quant_ffn::*;
    let mut rng = Rng::fresh("gpu matmul_int8 example");
    for &cfg in common::matmul_int8::CONFIGS {
        for size in [(300, 200, 100), (129, 257, 192), (1000, 33, 70), (1, 1, 1), (16, 130, 7)] {
            check_int8_accumulator(gpu, &mut rng, cfg, size);
            check_int8_requant(gpu, &mut rng, cfg, size, Scales::Random { bias: false });
            check_int8_requant(gpu, &mut rng, cfg, size, Scales::Random { bias: true });
            if size.2 >= 16 {
                check_int8_requant(gpu, &mut rng, cfg, size, Scales::Ties);
            }
        }
        println!("matmul_int8 {cfg:?} on {}: {:?}", gpu.description(), fuse::dot_path("matmul_int8"));
    }
}

/// The `ffn_sublayer` example (one kernel: LayerNorm statistics, normalised operand, bias + GELU +
/// residual) at every block configuration, f16 and bf16, against float64.
fn ffn_sublayer_example(gpu: &Device) {
    use common::quant_ffn::*;
    let mut rng = Rng::fresh("gpu ffn_sublayer example");
    for &cfg in common::ffn_sublayer::CONFIGS {
        for size in [(300, 200), (129, 264), (70, 1000), (1, 1), (5, 17)] {
            check_ffn::<f16>(gpu, &mut rng, cfg, size);
            check_ffn::<bf16>(gpu, &mut rng, cfg, size);
        }
    }
}

/// The `matmul_int8` and `ffn_sublayer` kernels (no emitted-CUDA snapshot while the tensor-core
/// lowering changes) compile with NVRTC (no GPU needed) for sm_80 and sm_90, with the launch-time
/// specialisations on (the proven, unchecked paths) and off (the checked ones): the variants of
/// `common::quant_ffn::specs`, each timed.
fn quant_ffn_kernels_compile_with_nvrtc() {
    for (spec, consts, warps, arch, all) in common::quant_ffn::specs() {
        let values = vec![all; spec.specializations().len()];
        let t0 = std::time::Instant::now();
        let what = format!("{} {consts:?} with {warps} warps for {arch} (specialisations {all})", spec.name());
        if let Err(e) = spec.compile_for_arch_with(arch, &consts, warps, &values) {
            panic!("{what} failed:\n{e}");
        }
        println!("{what}: {:.1} s", t0.elapsed().as_secs_f64());
    }
}

fn main() {
    let mut trials = harness::gpu_trials(vec![
        ("matmul_f16_bf16_f32", matmul_f16_bf16_f32),
        ("matmul_i8", matmul_i8),
        ("accumulator_method_form_and_converted_operands", accumulator_method_form_and_converted_operands),
        ("fallback_matches_the_interpreter_bit_for_bit", fallback_matches_the_interpreter_bit_for_bit),
        ("reductions_of_a_dot_result", reductions_of_a_dot_result),
        ("pipelined_k_loops", pipelined_k_loops),
        ("k_major_b_operands", k_major_b_operands),
        ("warpgroup_blocks", warpgroup_blocks),
        ("matmul_int8_example", matmul_int8_example),
        ("ffn_sublayer_example", ffn_sublayer_example),
    ]);
    trials.extend(harness::nvrtc_trials(vec![(
        "quant_ffn_kernels_compile_with_nvrtc",
        quant_ffn_kernels_compile_with_nvrtc,
    )]));
    harness::run(trials)
}
