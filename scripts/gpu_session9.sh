#!/usr/bin/env bash
# Session 9 on the device (binaries staged by scripts/stage.sh into .gpu/): the wgmma K loops no
# longer serialised by ptxas (the loop and its last wgmma wait under their own guard), checked
# and timed beside Triton and cuBLAS in the same call.
# Usage: bash scripts/gpu_session9.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    dot) # every tensor-core test (ragged sizes, 2-4 stages, wgmma and the forced mma.sync path)
        run gpu_dot timeout ${T:-500} .gpu/test-gpu_dot --test-threads=4 ${DOT_ONLY:-} ;;
    dot_mma_sync) # the same blocks forced onto mma.sync
        for t in warpgroup_blocks pipelined_k_loops k_major_b_operands; do
            FUSE_MMA_SYNC=1 run gpu_dot_mma_sync_$t timeout 200 .gpu/test-gpu_dot $t
        done ;;
    examples) # the examples against float64 (matmul, int8, ffn, attention among them)
        run gpu_examples timeout 300 .gpu/test-gpu_examples --test-threads=4 ;;
    attention)
        run gpu_attention timeout 300 .gpu/test-gpu_attention --test-threads=2 ;;
    mm) # matmul f16/bf16 plain and + bias + GELU, int8, every wgmma configuration
        T=420 bench mm .gpu/bench-matmul FUSE_BENCH_ONLY=${MM_ONLY:-matmul} FUSE_BENCH_CONFIGS=${MM_CONFIGS:-3,4,7,8,9,10,11,12,13,14}
        grep -E "fuse  " $L/mm.log ;;
    att) # attention, configurations 0, 3, 6
        T=300 bench att .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,3,6}
        grep -E "fuse  " $L/att.log ;;
    peers) # triton_dot.py (Triton's matmul + epilogue and FlashAttention forward, cuBLAS) and torch_peers.py
        peers; grep -E "matmul|attention" $L/triton_dot.log | head -40 ;;
    sanitize) # the in-flight K loops (copies now issued after the MMAs) under memcheck, racecheck and synccheck
        sanitize_dot warpgroup_blocks ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
