#!/usr/bin/env bash
# Issue 13 on the device: the GPU tests (interop, runtime, examples), compute-sanitizer memcheck
# over the interop tests (views, cudarc memory, graphs), the graph launch bench, and (when the
# binary was carried) the candle example. Binaries come staged in $BIN (default .gpu2).
# Usage on the device: bash scripts/gpu_interop.sh   (logs packed into $OUT/interop-logs.tgz)
set -uo pipefail
BIN=${BIN:-.gpu2}
. "$(dirname "$0")/gpu_common.sh"
nvidia-smi -L | tee "$L/gpus.txt"
date -u | tee -a "$L/gpus.txt"
run gpu_interop "$BIN/test-gpu_interop"
run gpu "$BIN/test-gpu"
run gpu_examples "$BIN/test-gpu_examples"
run memcheck_interop compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-gpu_interop" --test-threads=1 --skip two_gpus
grep -E "ERROR SUMMARY" "$L/memcheck_interop.log"
if [ -x "$BIN/test-graphs" ]; then
    FUSE_BENCH_JSON="$L/graphs.json" run graphs_bench "$BIN/test-graphs"
    cat "$L/graphs_bench.log"
fi
if [ -x "$BIN/candle_layernorm" ]; then
    run candle_layernorm "$BIN/candle_layernorm"
    tail -15 "$L/candle_layernorm.log"
fi
tar czf "${OUT:-/tmp}/interop-logs.tgz" -C "$(dirname "$L")" logs
echo "status $status"
exit $status
