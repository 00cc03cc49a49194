#!/usr/bin/env bash
# Session 12 on the device (binaries staged by scripts/stage.sh into .gpu/): tensor-core results
# stored through the scratch (16-byte row runs, emit_cuda/coalesce.rs) against the same benches
# built without it (.gpu/bench-matmul-old, commit 6488e26), beside the peers in the same call.
# Usage: bash scripts/gpu_session12.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    dot) # every gpu_dot test (the f16/bf16/i8 stores of the pipelined blocks)
        run gpu_dot timeout ${T:-300} .gpu/test-gpu_dot --test-threads=2 ;;
    examples)
        run gpu_examples timeout 300 .gpu/test-gpu_examples --test-threads=4 ;;
    attention)
        run gpu_attention timeout 300 .gpu/test-gpu_attention --test-threads=2 ;;
    mm) # the matmul table (plain, and bias+GELU with MM_ONLY=matmul/,matmul_bias_gelu/), new then old binary
        for b in matmul matmul-old; do
            T=300 bench mm_$b .gpu/bench-$b FUSE_BENCH_ONLY=${MM_ONLY:-matmul/} FUSE_BENCH_CONFIGS=${MM_CONFIGS:-13}
            grep -E "fuse  " $L/mm_$b.log | sed "s/^/$b /"
        done ;;
    i8) # int8 at its best configurations, new then old
        for b in matmul matmul-old; do
            T=300 bench i8_$b .gpu/bench-$b FUSE_BENCH_ONLY=matmul_int8 FUSE_BENCH_CONFIGS=${I8_CONFIGS:-4}
            grep -E "fuse  " $L/i8_$b.log | sed "s/^/$b /"
        done ;;
    att) # attention at the bench's configurations, new then old
        for b in matmul matmul-old; do
            T=300 bench att_$b .gpu/bench-$b FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,2,3,6}
            grep -E "fuse  " $L/att_$b.log | sed "s/^/$b /"
        done ;;
    sanitize) # memcheck and racecheck on the stores through the scratch (f16 and i8 results)
        for t in matmul_example matmul_int8_example; do
            run memcheck_$t timeout ${T:-200} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_dot $t --exact --test-threads=1
            run racecheck_$t timeout ${T:-250} compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_dot $t --exact --test-threads=1
        done
        run memcheck_att timeout ${T:-200} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        run racecheck_att timeout ${T:-250} compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1 ;;
    peers) # triton_dot.py (and torch_peers.py with TORCH_PEERS=1)
        peers; grep -E "attention|matmul" $L/triton_dot.log | head -40 ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
