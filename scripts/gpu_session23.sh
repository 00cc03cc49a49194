#!/usr/bin/env bash
# Session 23 on the device: issue 14's f16 LayerNorm narrow rows against torch.compile.
# Sources: .gpu/<folder>/*.cu, written by `cargo run --release --example rows_sources -- DIR
# layernorm f16 8x256_w4 ...` (scripts/experiments/rows_sweep/rows_sources.rs: every launch fact
# proven), then hand-edited by scripts/experiments/rows_sweep/variants.py; no Rust binaries needed
# for the sweep modes. The `one_warp`, `ab_warps` and common modes need the staged tests and bench.
# Usage: bash scripts/gpu_session23.sh MODE ...   (logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
source scripts/experiments/rows_sweep/sweep.sh # compile_folder, sweep, ncu_all
for mode in "$@"; do
    case $mode in
    sweep6) ONLY="layernorm/.*/float16" ROUNDS=3 sweep .gpu/sweep6 ;; # LayerNorm f16: tiles x hand edits (early, last, plain, approx, vec16, nocap)
    ncu6) ONLY="layernorm/16384x256/float16" ncu_all .gpu/ncu6 ;; # a few of them under Nsight Compute beside torch.compile
    sweep7) ONLY="layernorm/.*/float16" ROUNDS=5 sweep .gpu/sweep7 ;; # LayerNorm f16: the launcher's tiles and one-warp ones, with L2 evict_last weight loads, approx
    sweep8) ONLY="layernorm/.*/float16" ROUNDS=5 TC_CUBIN=1 sweep .gpu/sweep8 ;; # torch.compile's own cubins launched by rows_sweep.py's ctypes path, beside fuse's
    ncu9) ONLY="layernorm/.*/float16" ncu_all .gpu/ncu9 ;; # the 16-bit rows tiles on 2 and 4 warps under Nsight Compute beside torch.compile
    sweep10) ONLY="layernorm/.*/float16" ROUNDS=4 sweep .gpu/sweep10 ;; # LayerNorm f16: x loaded with L2 evict_first or ld.global.cs
    one_warp) # the one-warp variants that the 64-register cap would spill (compiled again uncapped), then under memcheck and racecheck
        run one_warp timeout 200 .gpu/test-gpu_examples one_warp_variants_past_the_register_cap --test-threads=1
        for tool in memcheck racecheck; do
            run ${tool}_one_warp timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples one_warp_variants_past_the_register_cap --test-threads=1
        done ;;
    sweep11) ONLY="layernorm/.*/float16" ROUNDS=5 sweep .gpu/sweep11 ;; # LayerNorm f16: `1 / n` at the kernel's head (_head: hand-edited #if) on 1- and 2-warp tiles
    ab_warps) # LayerNorm f16 narrow rows on 2 and on 4 warps (FUSE_BENCH_WARPS), 2 alternated rounds (session 23 ran it on a launcher that chose 2, reverted)
        ab_rounds layernorm/65536x128/float16,layernorm/16384x256/float16 \
            "w2 .gpu/bench-anchors FUSE_BENCH_WARPS=2" "w4 .gpu/bench-anchors FUSE_BENCH_WARPS=4" ;;
    *) common_mode $mode || { echo "unknown mode $mode"; status=1; } ;;
    esac
    pack_logs
done
session_end
