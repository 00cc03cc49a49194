#!/usr/bin/env bash
# Issue 13 + 14 on the device: GPU tests (interop, runtime, examples, 2-D tiles), compute-sanitizer
# memcheck and racecheck over the 2-D tile tests (the shared scratch and its barriers), and, when
# staged, the candle example. Binaries come staged in $BIN (default .gpu). Logs: $OUT/logs.tgz.
set -uo pipefail
BIN=${BIN:-.gpu}
. "$(dirname "$0")/gpu_common.sh"
nvidia-smi -L | tee "$L/gpus.txt"; date -u | tee -a "$L/gpus.txt"
run tiles_2d "$BIN/test-tiles_2d"
run gpu_interop "$BIN/test-gpu_interop"
run gpu "$BIN/test-gpu"
run gpu_examples "$BIN/test-gpu_examples"
run memcheck_tiles_2d compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-tiles_2d" --test-threads=1
run racecheck_tiles_2d compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test-tiles_2d" --test-threads=1
[ -x "$BIN/example-softmax" ] && run example_softmax "$BIN/example-softmax"
for b in "$BIN"/candle_* "$BIN"/test-candle*; do [ -x "$b" ] && run "$(basename "$b")" "$b"; done
tar czf "${OUT:-/tmp}/logs.tgz" -C "$(dirname "$L")" logs
echo "status $status"
exit $status
