#!/usr/bin/env bash
# Issue 15 (tensor-core dot) on the device, over binaries staged by scripts/stage.sh (carry: [".gpu"]).
# Usage: bash scripts/gpu_issue15.sh check|sanitize|bench|peers ...  (modes run in the order given)
#   check:    tests/gpu_dot.rs, the matmul example (f16/bf16 vs float64 over every block config),
#             the runtime's GPU tests (dynamic shared memory) and the autotune GPU tests.
#   sanitize: compute-sanitizer memcheck and racecheck over tests/gpu_dot.rs.
#   bench:    benches/matmul.rs -> $OUT/matmul.json.
#   peers:    triton_dot.py (copied into $BIN from ../shared/anchors) -> $OUT/triton_dot.json.
set -uo pipefail
BIN=${BIN:-.gpu}
. "$(dirname "$0")/gpu_common.sh"
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$L/device.txt"
date -u | tee -a "$L/device.txt"
pack() { cp -f "${OUT:-/tmp}"/*.json "$L/" 2>/dev/null; tar czf "${OUT:-/tmp}/logs.tgz" -C "$(dirname "$L")" logs; }
for mode in "$@"; do
    case $mode in
    check)
        run gpu_dot "$BIN/test-gpu_dot"
        [ -x "$BIN/example-matmul" ] && run example_matmul "$BIN/example-matmul"
        [ -x "$BIN/test-gpu" ] && run runtime_gpu "$BIN/test-gpu"
        [ -x "$BIN/test-autotune" ] && run autotune "$BIN/test-autotune"
        ;;
    sanitize)
        run memcheck_gpu_dot compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-gpu_dot" --test-threads=1
        run racecheck_gpu_dot compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test-gpu_dot" --test-threads=1
        ;;
    bench)
        FUSE_BENCH_JSON=${OUT:-/tmp}/matmul.json run bench_matmul "$BIN/bench-matmul"
        cat "$L/bench_matmul.log"
        ;;
    peers)
        (cd "${OUT:-/tmp}" && python "$OLDPWD/$BIN/triton_dot.py") >"$L/triton_dot.log" 2>&1 || status=1
        tail -40 "$L/triton_dot.log"
        ;;
    esac
    pack
done
echo "status $status"
exit $status
