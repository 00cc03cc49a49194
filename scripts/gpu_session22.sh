#!/usr/bin/env bash
# Session 22 on the device (bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors
#          && bash scripts/stage.sh -p fuse-runtime --test gpu; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session22.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
# sweep $1: a folder of emitted sources (rows_sources, variants.py) timed against torch.compile
# (rows_sweep.py, cases matching $ONLY); torch.compile's code kept in $L/inductor.tgz
source scripts/experiments/rows_sweep/sweep.sh
for mode in "$@"; do
    case $mode in
    sanitize) # the kernels whose code this session changed (early loads, one-warp launch bounds) under memcheck and racecheck
        for t in rows_kernels_on_gpu softmax_and_layernorm_on_gpu split_join_on_gpu; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
            done
        done ;;
    sweep2) ONLY="layernorm/.*/float32" ROUNDS=4 sweep .gpu/sweep2 ;; # LayerNorm f32 tiles and hand-edited load variants
    sweep3) ONLY="layernorm" ROUNDS=4 sweep .gpu/sweep3 ;; # LayerNorm: the weight and bias loaded first (ln_early), Inductor's rsqrt and division
    sweep4) ONLY="layernorm/.*/float32" ROUNDS=4 sweep .gpu/sweep4 ;; # LayerNorm f32 on one warp: early loads (the emitter), at most 64 registers (launch bounds)
    sweep5) ONLY="layernorm/.*/float16" ROUNDS=3 sweep .gpu/sweep5 ;; # LayerNorm f16: tiles x warps, with and without early loads (_e)
    ab_early) # the early loads (emit_cuda/schedule.rs) against the same build without them
        # (bench-anchors-noearly), on every LayerNorm anchor and row, 2 alternated rounds
        ab_rounds layernorm "early .gpu/bench-anchors" "noearly .gpu/bench-anchors-noearly" ;;
    *) common_mode $mode || { echo "unknown mode $mode"; status=1; } ;; # verify, anchors, peers_all, short_rounds, add_rounds, rows_rounds, same_rows (gpu_common.sh)
    esac
    pack_logs
done
session_end
