#!/usr/bin/env bash
# One device call (2026-11-24, third session): the tensor-core dot's quick GPU tests and sanitizers,
# the matmul example and bench, the axis-0 tiles tests, the qk_norm_rope sweep and the rows kernels.
set -uo pipefail
BIN=${BIN:-.gpu}
. "$(dirname "$0")/gpu_common.sh"
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/device.txt"; date -u | tee -a "$L/device.txt"
pack() { cp -f "${OUT:-/tmp}"/*.json "$L/" 2>/dev/null; tar czf "${OUT:-/tmp}/logs.tgz" -C "$(dirname "$L")" logs; }
quick="--skip matmul_f16_bf16_f32 --skip matmul_i8"
run gpu_dot_quick timeout 120 "$BIN/test-gpu_dot" $quick; pack
run memcheck_dot timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-gpu_dot" --test-threads=1 reductions_of_a_dot_result accumulator_method_form_and_converted_operands; pack
run racecheck_dot timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test-gpu_dot" --test-threads=1 reductions_of_a_dot_result; pack
FUSE_BENCH_ONLY=4096x4096x4096/float16 FUSE_BENCH_JSON=${OUT:-/tmp}/matmul.json run bench_matmul timeout 120 "$BIN/bench-matmul"; grep " fuse" "$L/bench_matmul.log"; pack
run tiles_2d timeout 150 "$BIN/test-tiles_2d"; pack
run autotune timeout 60 "$BIN/test-autotune"; pack
FUSE_BENCH_ONLY=65536x128,16384x256 run bench_rows timeout 90 "$BIN/bench-anchors"; grep " fuse " "$L/bench_rows.log"; pack
for h in 8 16 64; do for w in 2 4 8; do
    echo "heads=$h warps=$w: $(FUSE_BENCH_QK_HEADS=$h FUSE_BENCH_WARPS=$w FUSE_BENCH_ONLY=qk_norm_rope timeout 30 "$BIN/bench-anchors" 2>&1 | grep ' fuse ' | awk '{print $1, $3, $5}' | tr '\n' ' ')"
done; done | tee "$L/qksweep.log"; pack
run example_matmul timeout 150 "$BIN/example-matmul"; grep -cE "PASS" "$L/example_matmul.log"; grep -E "FAIL|TFLOP" "$L/example_matmul.log"; pack
echo "status $status"
