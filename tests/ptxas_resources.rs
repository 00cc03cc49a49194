//! What ptxas makes of the tensor-core kernels on Hopper (`sm_90a`), from NVRTC alone (no GPU):
//! the K loops keep their wgmma instructions in flight (ptxas did not serialise them, its
//! "Potential Performance Loss" note), the matmul epilogues do not spill by the hundred bytes, and
//! the attention kernels the bench runs (dropout compiled out) do not spill at all, and the
//! narrow-row f16/bf16 LayerNorm fits 32 registers (16 programs of 4 warps a multiprocessor), the
//! f32 one on one warp 64 (32 programs). Each report is printed. harness = false (fuse_testkit::harness): without NVRTC the tests are
//! ignored, with the reason (under CI=true they fail).
use fuse_kernels::attention;
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::ffn_sublayer;
use fuse_kernels::layernorm;
use fuse_kernels::matmul;
use fuse_kernels::matmul_int8;
use fuse_testkit::harness;

use fuse::fuse_ir::Specialization;
use fuse::{KernelSpec, PtxasReport};

/// The launch-time facts of a bench launch: every proof on, each uniform branch (the epilogue's
/// `gelu`, attention's dropout) decided as `taken` says.
fn facts(spec: &KernelSpec, taken: bool) -> Vec<bool> {
    spec.specializations()
        .iter()
        .map(|s| match s {
            Specialization::BranchTaken(_) => taken,
            Specialization::BranchSkipped(_) => !taken,
            _ => true,
        })
        .collect()
}

/// ptxas's report for one variant, printed and checked to keep its MMAs in flight.
fn report(spec: &KernelSpec, consts: &[u64], warps: u32, stages: u32, taken: bool) -> PtxasReport {
    let what = format!("{} {consts:?} {warps} warps {stages} stages (branch taken: {taken})", spec.name());
    let r = spec
        .ptxas_report("sm_90a", consts, warps, stages, &facts(spec, taken))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    println!(
        "{what}: {} registers, {} bytes spilled, {} bytes of stack, wgmma serialised: {}",
        r.registers, r.spill_store_bytes, r.stack_bytes, r.wgmma_serialized
    );
    assert!(!r.wgmma_serialized, "{what}: ptxas serialised the wgmma instructions:\n{}", r.log);
    r
}

/// The matmul's Hopper configurations, plain and with the bias + GELU epilogue, f16 and bf16;
/// the int8 matmul's. The K loop's last wait sits under the loop's own guard, or ptxas serialises
/// the wgmma instructions; the epilogue reads an accumulator slot's column in closed form, or the
/// bias + GELU variant of 128x256x64 spills hundreds of bytes.
fn matmul_k_loops_stay_in_flight() {
    for spec in [&matmul::matmul::f16::SPEC, &matmul::matmul::bf16::SPEC] {
        for c in matmul::CONFIGS.iter().filter(|c| c.bk == 64 && c.warps == 8) {
            for gelu in [false, true] {
                let r = report(spec, &[c.bm as u64, c.bn as u64, c.bk as u64], c.warps, c.stages, gelu);
                assert!(
                    r.spill_store_bytes <= 256,
                    "{c:?} gelu {gelu}: {} bytes spilled",
                    r.spill_store_bytes
                );
            }
        }
    }
    for c in matmul_int8::CONFIGS.iter().filter(|c| c.warps == 8) {
        report(
            &matmul_int8::matmul_int8::SPEC,
            &[c.bm as u64, c.bn as u64, c.bk as u64],
            c.warps,
            c.stages,
            true,
        );
    }
}

/// No spills in the head-dim-128 attention kernels, f16 and bf16, at the configurations
/// the bench picks: with `p_drop = 0` (the dropout block compiled out, as the bench runs) and with
/// dropout (128 x 128 blocks only without it: its dropout variant sits at the 255-register edge).
fn attention_d128_does_not_spill() {
    for spec in [&attention::attention::f16::SPEC, &attention::attention::bf16::SPEC] {
        for (i, dropout) in [(3, true), (6, true), (2, false)] {
            let c = attention::CONFIGS[i];
            for taken in if dropout { vec![false, true] } else { vec![false] } {
                let r = report(spec, &[c.bm as u64, c.bn as u64, 128], c.warps, c.stages, taken);
                assert_eq!(
                    r.spill_store_bytes, 0,
                    "{c:?} dropout {taken}: {} bytes spilled",
                    r.spill_store_bytes
                );
            }
        }
    }
}

/// The narrow-row LayerNorm of 16-bit rows at the launcher's tiles (`[8, 256]`, `[16, 128]`, 4
/// warps, 16 lanes a thread) in at most 32 registers without spills, so 16 programs fit a
/// multiprocessor. The runtime computes `1 / n` on the host (fuse-ir's host_scalars.rs): with the
/// division in the kernel, ptxas keeps every converted lane live across the division's slow-path
/// call and the kernel takes 39 registers.
fn narrow_row_layernorm_fits_32_registers() {
    for spec in [&layernorm::layernorm_rows::f16::SPEC, &layernorm::layernorm_rows::bf16::SPEC] {
        for tile in [[8u64, 256], [16, 128]] {
            let r = report(spec, &tile, 4, 1, false);
            assert!(
                r.registers <= 32 && r.spill_store_bytes == 0,
                "{} {tile:?}: {} registers, {} bytes spilled",
                spec.name(),
                r.registers,
                r.spill_store_bytes
            );
        }
    }
}

/// The narrow-row LayerNorm of f32 rows at the launcher's one-warp tiles (`[4, 256]`, `[8, 128]`,
/// 32 lanes a thread) in at most 64 registers without spills, so 32 programs (a multiprocessor's
/// most) fit. Before one-warp kernels asked for 32 blocks (`__launch_bounds__(32, 32)`,
/// emit_cuda/lower/finish.rs) ptxas took 71 at `[4, 256]`, and only 28 fitted.
fn narrow_f32_rows_on_one_warp_fit_64_registers() {
    for tile in [[4u64, 256], [8, 128]] {
        let r = report(&layernorm::layernorm_rows::f32::SPEC, &tile, 1, 1, false);
        assert!(
            r.registers <= 64 && r.spill_store_bytes == 0,
            "{tile:?}: {} registers, {} bytes spilled",
            r.registers,
            r.spill_store_bytes
        );
    }
}

/// One-warp variants that need more than 64 registers do not spill: the runtime compiles them
/// again without the one-warp cap when it spills (cuda/nvrtc.rs `compile_capped`), and so they
/// take more than 64. With the cap kept: the FFN sublayer f16 32x32x32 spilled 522 bytes,
/// bias+GELU+dropout f32 `[1024]` 208 (with every launch fact proven). Checked for three sets of
/// launch facts: every one proven; aligned and in bounds but masked (a row of 1000 columns: no
/// divisibility, no all-true mask); none. The one-row LayerNorm f32 `[1024]` fits 64 with every
/// fact proven (it spilled 116 bytes there while its weight loads came early; the early loads'
/// size rule, emit_cuda/lower/mod.rs `early_when`, keeps them in place) and needs more masked.
fn one_warp_kernels_that_need_more_registers_do_not_spill() {
    // (kernel, consts, over the cap with every fact proven, masked, with none)
    let cases: [(&KernelSpec, &[u64], [bool; 3]); 3] = [
        (&ffn_sublayer::ffn_sublayer::f16::SPEC, &[32, 32, 32], [true; 3]),
        (&bias_gelu_dropout::bias_gelu_dropout::f32::SPEC, &[1024], [true; 3]),
        (&layernorm::layernorm::f32::SPEC, &[1024], [false, true, true]),
    ];
    for (spec, consts, over) in cases {
        let masked: Vec<bool> = spec
            .specializations()
            .iter()
            .map(|s| matches!(s, Specialization::Align16(_) | Specialization::InBounds(_)))
            .collect();
        let none = vec![false; spec.specializations().len()];
        let sets = [
            ("every launch fact", facts(spec, false)),
            ("masked launch facts", masked),
            ("no launch fact", none),
        ];
        for ((what, set), over) in sets.into_iter().zip(over) {
            let what = format!("{} {consts:?} on one warp, {what}", spec.name());
            let r = spec.ptxas_report("sm_90a", consts, 1, 1, &set).unwrap_or_else(|e| panic!("{what}: {e}"));
            println!("{what}: {} registers, {} bytes spilled", r.registers, r.spill_store_bytes);
            assert_eq!(r.spill_store_bytes, 0, "{what}: {}", r.log);
            // Over the cap's 64 only where the compile without it ran: the fallback.
            assert_eq!(r.registers > 64, over, "{what}: {} registers", r.registers);
        }
    }
}

/// A 256-column f32 row is 64 chunks: in warp slabs one warp holds it, so the narrow-row
/// LayerNorm's two row reductions need no barrier (ptxas reports "used 0 barriers"; the plain
/// order spread each row over two warps and folded them through shared memory).
fn wide_f32_rows_reduce_without_barriers() {
    for (tile, warps) in [([8u64, 256], 4u32), ([8, 256], 8), ([4, 256], 2)] {
        let r = report(&layernorm::layernorm_rows::f32::SPEC, &tile, warps, 1, false);
        assert!(r.log.contains("used 0 barriers"), "{tile:?} on {warps} warps: {}", r.log);
    }
}

fn main() {
    harness::run(harness::nvrtc_trials(vec![
        ("narrow_row_layernorm_fits_32_registers", narrow_row_layernorm_fits_32_registers),
        ("narrow_f32_rows_on_one_warp_fit_64_registers", narrow_f32_rows_on_one_warp_fit_64_registers),
        (
            "one_warp_kernels_that_need_more_registers_do_not_spill",
            one_warp_kernels_that_need_more_registers_do_not_spill,
        ),
        ("wide_f32_rows_reduce_without_barriers", wide_f32_rows_reduce_without_barriers),
        ("matmul_k_loops_stay_in_flight", matmul_k_loops_stay_in_flight),
        ("attention_d128_does_not_spill", attention_d128_does_not_spill),
    ]))
}
