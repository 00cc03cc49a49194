#!/usr/bin/env bash
# Issue 13 closing run on the device: the interop tests (graphs captured from several threads at
# once) repeated with the default parallel test threads, under compute-sanitizer memcheck once, a
# backtrace under cuda-gdb if any run crashes; the candle example and GPU tests (staged in
# .gpu2/candle-gpu.tar.xz by scripts/build_candle_gpu.sh) plainly and under memcheck; the runtime,
# 2-D and example GPU suites; the generic examples. Binaries staged in $BIN (scripts/stage.sh).
set -uo pipefail
BIN=${BIN:-.gpu}
REPEAT=${REPEAT:-20}
. "$(dirname "$0")/gpu_common.sh"
nvidia-smi -L | tee "$L/gpus.txt"; date -u | tee -a "$L/gpus.txt"

# Parallel graph captures: REPEAT whole runs of the interop tests, each with default threads.
crashes=0; fails=0
for i in $(seq 1 "$REPEAT"); do
    "$BIN/test-gpu_interop" >"$L/interop_run_$i.log" 2>&1; rc=$?
    if [ $rc -ge 128 ]; then crashes=$((crashes + 1)); elif [ $rc -ne 0 ]; then fails=$((fails + 1)); fi
    [ $rc -eq 0 ] && rm "$L/interop_run_$i.log"
done
echo "=== gpu_interop x$REPEAT (parallel test threads): $crashes crashed, $fails failed" | tee "$L/interop_repeat.txt"
[ $((crashes + fails)) -eq 0 ] || status=1
if [ $crashes -gt 0 ] && command -v cuda-gdb >/dev/null; then
    for i in 1 2 3 4 5 6 7 8; do
        timeout 300 cuda-gdb -batch -ex run -ex "thread apply all bt" --args "$BIN/test-gpu_interop" >"$L/interop_gdb_$i.log" 2>&1
        grep -q "SIGSEGV\|signal" "$L/interop_gdb_$i.log" && break
    done
fi
run gpu_interop_memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-gpu_interop"
run gpu "$BIN/test-gpu"
run gpu_examples "$BIN/test-gpu_examples"
run tiles_2d "$BIN/test-tiles_2d"
for e in add_mul softmax layernorm bias_gelu_dropout; do
    [ -x "$BIN/example-$e" ] && run "example_$e" "$BIN/example-$e"
done
if [ -f .gpu2/candle-gpu.tar.xz ]; then
    mkdir -p /tmp/cg && tar -xJf .gpu2/candle-gpu.tar.xz -C /tmp/cg
    run candle_layernorm /tmp/cg/candle_layernorm
    run test_candle_gpu /tmp/cg/test-candle_gpu --include-ignored
    run candle_memcheck compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/cg/test-candle_gpu --include-ignored
fi
tar czf "${OUT:-/tmp}/logs.tgz" -C "$(dirname "$L")" logs
echo "status $status"
exit $status
