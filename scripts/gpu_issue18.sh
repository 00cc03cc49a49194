#!/usr/bin/env bash
# Issue 18 (dot on Hopper's wgmma) on the device, over binaries staged by scripts/stage.sh:
#   bash scripts/stage.sh -p fuse --test gpu_dot --test gpu_attention --example matmul --example attention --bench matmul
# Usage: bash scripts/gpu_issue18.sh check|mmasync|attention|sanitize|bench|peers ...  (in order)
#   check:     gpu_dot on the default path (sm_90a: wgmma where the block makes warpgroups).
#   mmasync:   the same tests with FUSE_MMA_SYNC=1 (sm_90: mma.sync, the path of sm_80/89).
#   attention: gpu_attention's default configuration and the attention example.
#   sanitize:  compute-sanitizer memcheck and racecheck over the warpgroup tests.
#   bench:     benches/matmul.rs's matmul rows -> $OUT/matmul.json (FUSE_BENCH_CONFIGS picks).
#   peers:     triton_dot.py (cuBLAS, Triton's matmul with the epilogue) -> $OUT/triton_dot.json.
set -uo pipefail
BIN=${BIN:-.gpu}
. "$(dirname "$0")/gpu_common.sh"
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$L/device.txt"
date -u | tee -a "$L/device.txt"
pack() { cp -f "${OUT:-/tmp}"/*.json "$L/" 2>/dev/null; tar czf "${OUT:-/tmp}/logs.tgz" -C "$(dirname "$L")" logs; }
DOT_TESTS="warpgroup_blocks pipelined_k_loops k_major_b_operands matmul_f16_bf16_f32 reductions_of_a_dot_result accumulator_method_form_and_converted_operands"
for mode in "$@"; do
    case $mode in
    check)
        for t in $DOT_TESTS; do run gpu_dot_$t "$BIN/test-gpu_dot" $t --exact; done
        grep -h "matmul on" "$L"/gpu_dot_warpgroup_blocks.log
        ;;
    mmasync)
        for t in warpgroup_blocks pipelined_k_loops k_major_b_operands; do
            FUSE_MMA_SYNC=1 run mmasync_$t "$BIN/test-gpu_dot" $t --exact
        done
        grep -h "matmul on" "$L"/mmasync_warpgroup_blocks.log
        ;;
    attention)
        run gpu_attention "$BIN/test-gpu_attention" attention_default_config
        run example_attention "$BIN/example-attention"
        grep "TFLOP/s" "$L/example_attention.log"
        ;;
    sanitize)
        for tool in memcheck racecheck; do
            run ${tool}_wgmma compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test-gpu_dot" warpgroup_blocks --exact --test-threads=1
        done
        ;;
    bench)
        FUSE_BENCH_ONLY=${FUSE_BENCH_ONLY:-matmul/,matmul_bias_gelu/} FUSE_BENCH_JSON=${OUT:-/tmp}/matmul.json run bench_matmul "$BIN/bench-matmul"
        grep -E "^matmul.* fuse  " "$L/bench_matmul.log"
        ;;
    peers)
        (cd "${OUT:-/tmp}" && python "$OLDPWD/$BIN/triton_dot.py") >"$L/triton_dot.log" 2>&1 || status=1
        grep -E "matmul" "$L/triton_dot.log" | head -40
        ;;
    esac
    pack
done
echo "status $status"
exit $status
