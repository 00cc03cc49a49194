#!/usr/bin/env bash
# Session 24 on the device: the scalars the runtime computes at launch (fuse-ir's host_scalars.rs:
# LayerNorm's `1 / n`, dropout's `0.5 / (1 - p)`, the int8 matmul's `1 / out_scale` are kernel
# parameters now), checked and timed. The sweep modes need sources written by
# `cargo run --release --example rows_sources -- .gpu/<folder> layernorm f16 ...`; the others the
# staged tests and bench (scripts/stage.sh).
# Usage: bash scripts/gpu_session24.sh MODE ...   (logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
source scripts/experiments/rows_sweep/sweep.sh # compile_folder, sweep, ncu_all
for mode in "$@"; do
    case $mode in
    dot_attention) # the tensor-core tests: the int8 matmul's `1 / out_scale` and attention's `1 / (1 - p_drop)` are host scalars now
        run gpu_dot timeout 240 .gpu/test-gpu_dot --test-threads=2
        run gpu_attention timeout 240 .gpu/test-gpu_attention --test-threads=2 ;;
    sanitize) # example tests whose kernels take a host scalar (LayerNorm one-row and rows, dropout), under memcheck
        for t in softmax_and_layernorm rows_kernels dropout_masks; do
            run memcheck_$t timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
    sweep_tiles) ONLY="layernorm/.*/float16" ROUNDS=5 sweep .gpu/sweep_tiles ;; # LayerNorm f16: the launcher's tiles and the 1- and 2-warp ones
    int8) run gpu_dot_int8 timeout 240 .gpu/test-gpu_dot matmul_int8_example --test-threads=1 ;; # the int8 matmul example alone (its compiles are slow)
    ab_tile) # 16-bit narrow rows: the launcher's 2048-lane tile on its warps against the 1024-lane one on one warp
        # (FUSE_ROWS_TILE=1024: [8, 128] / [4, 256], torch.compile's tiles), 2 alternated rounds
        ab_rounds 65536x128/float16,16384x256/float16 "default .gpu/bench-anchors" \
            "one_warp .gpu/bench-anchors FUSE_ROWS_TILE=1024 FUSE_BENCH_WARPS=1" ;;
    rows1) peer_rounds rows 1 65536x128,16384x256 softmax layernorm ;; # the narrow rows against torch.compile, one round (device time was short)
    *) common_mode $mode || { echo "unknown mode $mode"; status=1; } ;;
    esac
    pack_logs
done
session_end
