#!/usr/bin/env bash
# Session 10 on the device (binaries staged by scripts/stage.sh into .gpu/): dot operands copied
# with TMA (cp.async.bulk.tensor + mbarrier) where the launch allows, checked against float64 and
# timed against the cp.async path (FUSE_TMA=0), Triton and cuBLAS in the same call.
# Usage: bash scripts/gpu_session10.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    pipe) # the pipelined tests alone (TMA where allowed, cp.async elsewhere), one at a time
        for t in warpgroup_blocks pipelined_k_loops k_major_b_operands; do
            run gpu_dot_$t timeout ${T:-150} .gpu/test-gpu_dot $t
        done ;;
    dot) # every tensor-core test but the int8 example (TMA where allowed, cp.async elsewhere)
        run gpu_dot timeout ${T:-420} .gpu/test-gpu_dot --test-threads=4 --skip matmul_int8_example ;;
    dot_notma) # the wgmma blocks with TMA turned off, and forced onto mma.sync (no TMA either)
        FUSE_TMA=0 run gpu_dot_notma timeout 200 .gpu/test-gpu_dot warpgroup_blocks
        FUSE_MMA_SYNC=1 run gpu_dot_mma_sync timeout 200 .gpu/test-gpu_dot warpgroup_blocks ;;
    int8) # the int8 example at every configuration (long: an NVRTC compile per configuration)
        run gpu_dot_int8 timeout ${T:-420} .gpu/test-gpu_dot matmul_int8_example ;;
    examples)
        run gpu_examples timeout 300 .gpu/test-gpu_examples --test-threads=4 ;;
    attention)
        run gpu_attention timeout 300 .gpu/test-gpu_attention --test-threads=2 ;;
    mm) # matmul f16/bf16 plain and + bias + GELU with TMA, then the same with cp.async
        T=300 bench mm .gpu/bench-matmul FUSE_BENCH_ONLY=${MM_ONLY:-matmul} FUSE_BENCH_CONFIGS=${MM_CONFIGS:-11,13,14}
        grep -E "fuse  " $L/mm.log
        [ -n "${NOTMA:-}" ] && { T=300 bench mm_notma .gpu/bench-matmul FUSE_TMA=0 FUSE_BENCH_ONLY=${MM_ONLY:-matmul} FUSE_BENCH_CONFIGS=${MM_CONFIGS:-11,13,14}; grep -E "fuse  " $L/mm_notma.log; } ;;
    att) # attention with TMA (keys and values: rank-3 maps, the head as third coordinate), then with cp.async
        T=300 bench att .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,2,3,6}
        grep -E "fuse  " $L/att.log
        [ -n "${NOTMA:-}" ] && { T=300 bench att_notma .gpu/bench-matmul FUSE_TMA=0 FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,2,3,6}; grep -E "fuse  " $L/att_notma.log; } ;;
    att_sanitize) # the attention example's kernel with TMA under memcheck and racecheck
        for tool in memcheck racecheck; do
            run ${tool}_att timeout ${T:-200} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        done ;;
    i8bench)
        T=300 bench i8 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul_int8 FUSE_BENCH_CONFIGS=${I8_CONFIGS:-4}
        grep -E "fuse  " $L/i8.log ;;
    peers) # triton_dot.py (Triton's matmul + epilogue and FlashAttention forward, cuBLAS) and torch_peers.py
        peers; grep -E "matmul" $L/triton_dot.log | head -40 ;;
    sanitize) # the TMA loops under memcheck, racecheck and synccheck
        sanitize_dot warpgroup_blocks ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
