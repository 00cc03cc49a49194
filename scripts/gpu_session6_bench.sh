#!/usr/bin/env bash
# Session 6 (issue 18) on the device: the matmul rows (FUSE_BENCH_CONFIGS) and attention rows of
# benches/matmul.rs with triton_dot.py and torch_peers.py in the same call, then the sanitizers
# over the warpgroup tests and the rand16 checks. Binaries staged by scripts/stage.sh into .gpu/.
# Usage: bash scripts/gpu_session6_bench.sh matmul|attention|triton|torch|sanitize|int8|rand16 ...
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache} PATH=/usr/local/cuda/bin:$PATH
O=${OUT:-/tmp}; mkdir -p $O/logs
for mode in "$@"; do
    case $mode in
    matmul)
        FUSE_BENCH_CONFIGS=${CONFIGS:-11,13,14} FUSE_BENCH_ONLY=matmul/,matmul_bias_gelu/ FUSE_BENCH_JSON=$O/matmul.json \
            .gpu/bench-matmul >$O/logs/bench_matmul.log 2>&1
        grep -E "fuse  " $O/logs/bench_matmul.log ;;
    attention)
        FUSE_BENCH_CONFIGS=0,3,4,6,7 FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_JSON=$O/attention.json \
            timeout 300 .gpu/bench-matmul >$O/logs/bench_attention.log 2>&1
        grep -E "fuse  " $O/logs/bench_attention.log ;;
    triton)
        (cd $O && python $OLDPWD/.gpu/triton_dot.py >$O/logs/triton_dot.log 2>&1); grep -E "matmul|attention" $O/logs/triton_dot.log ;;
    torch)
        (cd $O && python $OLDPWD/.gpu/torch_peers.py >$O/logs/torch_peers.log 2>&1); grep -E "attention" $O/logs/torch_peers.log ;;
    sanitize)
        for tool in memcheck racecheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot warpgroup_blocks --exact --test-threads=1 >$O/logs/${tool}_wgmma.log 2>&1
            echo "$tool rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $O/logs/${tool}_wgmma.log
        done ;;
    int8)
        timeout 400 .gpu/test-gpu_dot matmul_int8_example --exact >$O/logs/gpu_dot_int8.log 2>&1; echo "int8 example rc $?"
        grep -E "test result|FAILED|panicked|matmul_int8.*on" $O/logs/gpu_dot_int8.log | head
        FUSE_BENCH_CONFIGS=13 FUSE_BENCH_ONLY=matmul_int8,matmul/ FUSE_BENCH_JSON=$O/int8.json .gpu/bench-matmul >$O/logs/bench_int8.log 2>&1
        grep -E "fuse  " $O/logs/bench_int8.log ;;
    rand16)
        .gpu/test-gpu_examples >$O/logs/gpu_examples.log 2>&1; echo "gpu_examples rc $?"; grep -E "test result|FAILED" $O/logs/gpu_examples.log
        FUSE_BENCH_ONLY=bias_gelu_dropout FUSE_BENCH_WITH_COPY=1 FUSE_BENCH_JSON=$O/dropout.json .gpu/bench-anchors >$O/logs/dropout.log 2>&1
        grep -E "bias_gelu_dropout|copy" $O/logs/dropout.log | head -20 ;;
    esac
done
tar czf $O/logs.tgz -C $O logs
