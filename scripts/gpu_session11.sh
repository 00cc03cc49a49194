#!/usr/bin/env bash
# Session 11 on the device (binaries staged by scripts/stage.sh into .gpu/): `exp2` as one
# `ex2.approx.ftz` (softmax rows, cross-entropy, attention), the rows-tile sweep of the narrow
# LayerNorm rows, and the 4096^3 configurations (two programs an SM) of the f16 and int8 matmuls,
# each beside its peers in the same call.
# Usage: bash scripts/gpu_session11.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    rows) # issue 14's narrow rows and cross-entropy beside the same-bytes copy
        T=300 bench rows .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128,16384x256,cross_entropy FUSE_BENCH_WITH_COPY=1
        grep -E "fuse|copy" $L/rows.log | head -40 ;;
    ln_sweep) # LayerNorm's narrow rows: tile elements x warps
        for t in 1024 2048 4096 8192; do for w in 2 4 8; do
            bench ln_t${t}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=layernorm/65536x128,layernorm/16384x256 FUSE_ROWS_TILE=$t FUSE_BENCH_WARPS=$w
            grep -E "layernorm.*fuse" $L/ln_t${t}_w$w.log | sed "s/^/t$t w$w /"
        done; done ;;
    ce_sweep) # cross-entropy bf16 at 50257 columns: warps x column block
        for cb in 2048 4096 8192; do for w in 4 8 16; do
            bench ce_b${cb}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=cross_entropy/4096x50257 FUSE_BENCH_CE_BLOCK=$cb FUSE_BENCH_WARPS=$w
            grep -E "cross_entropy.*fuse" $L/ce_b${cb}_w$w.log | sed "s/^/b$cb w$w /"
        done; done ;;
    peers_rows) # Triton, torch eager and torch.compile on the same rows (scripts/peers_v2.py)
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/scripts/peers_v2.py ${PEERS:-softmax ln ce}) >$L/peers_v2.log 2>&1; echo "peers_v2 rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; grep -E "^(ok|best|FAILED)" $L/peers_v2.log | tail -60 ;;
    pipe) # the pipelined dot tests (ragged edges: the per-chunk cp.async path), one at a time
        for t in ${PIPE_TESTS:-pipelined_k_loops k_major_b_operands warpgroup_blocks}; do
            run gpu_dot_$t timeout ${T:-150} .gpu/test-gpu_dot $t
        done ;;
    examples)
        run gpu_examples timeout 300 .gpu/test-gpu_examples --test-threads=4 ;;
    attention)
        run gpu_attention timeout 300 .gpu/test-gpu_attention --test-threads=2 ;;
    mm4096) # every 8-warp wgmma configuration at 4096^3 (f16 plain and bias+GELU), int8's at 4096^3
        T=400 bench mm4096 .gpu/bench-matmul FUSE_BENCH_ONLY=4096x4096x4096/float16 FUSE_BENCH_CONFIGS=${MM_CONFIGS:-4,7,8,9,10,11,12,13,14}
        grep -E "fuse" $L/mm4096.log
        T=300 bench i8_4096 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul_int8/4096 FUSE_BENCH_CONFIGS=0,1,2,3,4,5
        grep -E "fuse" $L/i8_4096.log ;;
    mm) # the matmul table (plain and bias+GELU, f16 and bf16) and int8
        T=300 bench mm .gpu/bench-matmul FUSE_BENCH_ONLY=matmul FUSE_BENCH_CONFIGS=${MM_CONFIGS:-11,13,14}
        grep -E "fuse  " $L/mm.log ;;
    att) # attention at the bench's configurations
        T=300 bench att .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,2,3,6}
        grep -E "fuse  " $L/att.log ;;
    sanitize) # memcheck on what changed: the examples (per-chunk masked vectors, cross-entropy),
        # attention (causal order, reciprocal) and the ragged cp.async stages of the pipelined loops
        run memcheck_examples timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples --test-threads=4
        run memcheck_att timeout ${T:-200} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        run memcheck_pipe timeout ${T:-150} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_dot pipelined_k_loops --test-threads=1 ;;
    racecheck) # racecheck (and synccheck on attention) on the same
        run racecheck_att timeout ${T:-250} compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        run synccheck_att timeout ${T:-150} compute-sanitizer --tool synccheck --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        run racecheck_pipe timeout ${T:-200} compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_dot pipelined_k_loops --test-threads=1 ;;
    peers) # triton_dot.py (and torch_peers.py with TORCH_PEERS=1)
        peers; grep -E "attention|matmul" $L/triton_dot.log | head -40 ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
