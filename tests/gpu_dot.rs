//! `dot` on a GPU: the checks of `tests/dot_on_cpu.rs` (float64 references, NaN-poisoned outputs)
//! at larger sizes and several warp counts. f32 `dot` runs on TF32 tensor cores (`mma.sync`
//! m16n8k8), which sum in another order than the CPU interpreter: it is checked against float64
//! within f32 summation error like the half types (the `tf32_*` tests), and its input rounding
//! against the interpreter bit for bit on data whose sums are exact in any order.
//! The `matmul` example (f16/bf16 results stored from the accumulator through shared memory), and
//! the `matmul_int8` and `ffn_sublayer` examples' checks (tests/common/quant_ffn.rs) at larger
//! sizes and every block configuration, and an NVRTC compile of their kernels (no GPU needed).
//! harness = false (fuse_testkit::harness): without a GPU the tests are reported
//! as ignored, with the reason; without NVRTC the compile test too (under CI=true it fails).
use fuse_kernels::bias_gelu_dropout;
mod common;
use fuse_kernels::matmul as matmul_example;
use fuse_testkit::harness;

use common::dot::*;
use common::Rng;
use fuse::half::{bf16, f16};
use fuse::Device;

/// The configurations of an example's `CONFIGS` that its test runs: all of them, or the indices
/// listed in `FUSE_TEST_CONFIGS` (e.g. `4`: the benched int8 block, for a run under
/// compute-sanitizer that cannot afford every NVRTC compile).
fn picked_configs<C: Copy>(all: &[C]) -> Vec<C> {
    match std::env::var("FUSE_TEST_CONFIGS") {
        Ok(list) => {
            list.split(',').filter_map(|i| all.get(i.trim().parse::<usize>().ok()?).copied()).collect()
        }
        Err(_) => all.to_vec(),
    }
}

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

/// f32 inputs are rounded to TF32 on the GPU exactly as the CPU interpreter rounds them (to
/// nearest, ties away from zero): on inputs full of ties whose sums are exact in any order, the
/// GPU's result equals the interpreter's and the float64 one bit for bit (`check_tf32_rounding`),
/// at block shapes, warp counts and stage counts of the pipelined and the plain paths. (This test
/// replaces a bit-for-bit comparison of f32 matmul on random data, which held while f32 `dot`
/// took the general fallback, summing in the IR's order; the tensor cores sum in another.)
fn tf32_rounding_matches_the_interpreter_bit_for_bit(gpu: &Device) {
    let mut rng = Rng::fresh("gpu tf32 rounding");
    check_tf32_rounding::<32, 32, 16>(gpu, &mut rng, (96, 80, 72), 4, 1);
    check_tf32_rounding::<64, 64, 32>(gpu, &mut rng, (130, 70, 333), 4, 3);
    check_tf32_rounding::<128, 128, 32>(gpu, &mut rng, (257, 129, 1000), 8, 2);
    check_tf32_rounding::<64, 64, 32>(gpu, &mut rng, (100, 200, 96), 1, 4);
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

/// f32 `a @ w^T` with `w` K-major (`dot(x, trans(y))`, read by ldmatrix without `.trans`),
/// pipelined and not, over block shapes, warps and ragged sizes, against float64.
fn tf32_k_major_b_operands(gpu: &Device) {
    let mut rng = Rng::fresh("gpu tf32 matmul_nt");
    for warps in [1, 2, 4, 8] {
        check_nt_once::<f32>(gpu, &mut rng, warps);
    }
    let cases = [
        ((130, 70, 1000), (64, 64), 4, 3),
        ((257, 129, 96), (128, 128), 4, 2),
        ((100, 200, 333), (64, 64), 1, 4),
        ((64, 64, 64), (32, 32), 8, 3),
        ((300, 260, 250), (128, 128), 8, 4),
    ];
    for (size, block, warps, stages) in cases {
        check_nt::<f32>(gpu, &mut rng, size, block, warps, stages);
    }
}

/// Row sums and column maxima of an f32 (TF32) dot result, 1 to 8 warps.
fn tf32_reductions_of_a_dot_result(gpu: &Device) {
    let mut rng = Rng::fresh("gpu tf32 dot reductions");
    for warps in [1, 2, 4, 8] {
        check_reductions::<f32>(gpu, &mut rng, warps);
    }
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

/// `a @ w^T` with `w` K-major (`dot(x, trans(y))`, read by ldmatrix without `.trans`), pipelined
/// and not (num_stages 1 vs 3 is the same plan; the non-pipelined path is the `dot_forms` one),
/// over block shapes, warps and ragged sizes.
fn k_major_b_operands(gpu: &Device) {
    let mut rng = Rng::fresh("gpu matmul_nt");
    let cases = [
        ((130, 70, 1000), (64, 64), 4, 3),
        ((257, 129, 96), (128, 128), 4, 2),
        ((100, 200, 333), (64, 64), 1, 4),
        ((64, 64, 64), (32, 32), 8, 3),
    ];
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
    for cfg in picked_configs(common::matmul_int8::CONFIGS) {
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

/// The `matmul` example at four block configurations (one warpgroup, two, the bench's 128x256x64,
/// and one warp on `mma.sync`'s grid), f16 and bf16, plain and with bias + GELU:
/// its half-precision result goes from the accumulator through shared memory to 16-byte row runs
/// (`emit_cuda/coalesce.rs`); ragged sizes mask rows and columns of those runs, aligned ones take
/// the unchecked vector stores. Against float64 within the f32 sum's error and one rounding.
fn matmul_example(gpu: &Device) {
    fn case<T: common::Elem + fuse::Half>(gpu: &Device, rng: &mut Rng, cfg: matmul_example::Config) {
        for (m, n, k) in [(129, 257, 64), (16, 130, 7), (256, 512, 128)] {
            for gelu in [false, true] {
                let (a, b, bias) = (rng.vec(m * k, 1.0), rng.vec(k * n, 1.0), rng.vec(n, 1.0));
                let (a, b, bias) = (T::from_f32s(&a), T::from_f32s(&b), T::from_f32s(&bias));
                let up = |v: &[T]| gpu.upload(v).unwrap();
                let mut c = gpu.upload(&T::from_f32s(&vec![f32::NAN; m * n])).unwrap();
                matmul_example::launch(gpu, cfg, &up(&a), &up(&b), &up(&bias), &mut c, (m, n, k), gelu)
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
                let what = format!("matmul {} {m}x{n}x{k} gelu {gelu} {cfg:?}", T::NAME);
                let got = T::to_f64s(&c.to_vec().unwrap());
                let (atol, rtol) = if T::NAME == "f16" { (2e-3, 2e-3) } else { (1e-2, 1e-2) };
                common::assert_close(&what, &got, &want, atol * (k as f64).sqrt(), rtol);
            }
        }
    }
    let mut rng = Rng::fresh("gpu matmul example");
    for i in [0, 10, 13, matmul_example::CONFIGS.len() - 1] {
        let cfg = matmul_example::CONFIGS[i];
        case::<f16>(gpu, &mut rng, cfg);
        case::<bf16>(gpu, &mut rng, cfg);
    }
}

/// The `ffn_sublayer` example (one kernel: LayerNorm statistics, normalised operand, bias + GELU +
/// residual) at every block configuration, f16 and bf16, against float64.
fn ffn_sublayer_example(gpu: &Device) {
    use common::quant_ffn::*;
    let mut rng = Rng::fresh("gpu ffn_sublayer example");
    for cfg in picked_configs(common::ffn_sublayer::CONFIGS) {
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
        let what =
            format!("{} {consts:?} with {warps} warps for {arch} (specialisations {all})", spec.name());
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
        (
            "tf32_rounding_matches_the_interpreter_bit_for_bit",
            tf32_rounding_matches_the_interpreter_bit_for_bit,
        ),
        ("tf32_blocks_warps_and_stages", tf32_blocks_warps_and_stages),
        ("tf32_k_major_b_operands", tf32_k_major_b_operands),
        ("tf32_reductions_of_a_dot_result", tf32_reductions_of_a_dot_result),
        ("reductions_of_a_dot_result", reductions_of_a_dot_result),
        ("pipelined_k_loops", pipelined_k_loops),
        ("k_major_b_operands", k_major_b_operands),
        ("warpgroup_blocks", warpgroup_blocks),
        ("matmul_example", matmul_example),
        ("matmul_int8_example", matmul_int8_example),
        ("ffn_sublayer_example", ffn_sublayer_example),
    ]);
    trials.extend(harness::nvrtc_trials(vec![(
        "quant_ffn_kernels_compile_with_nvrtc",
        quant_ffn_kernels_compile_with_nvrtc,
    )]));
    harness::run(trials)
}
