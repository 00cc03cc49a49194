#!/usr/bin/env bash
# Issue 14 on the device, over binaries staged by scripts/stage.sh (carry: [".gpu"]).
# Usage: bash scripts/gpu_issue14.sh check|bench|peers|anchors|qksweep
#   check:   2-D tile tests, GPU example tests, memcheck+racecheck of the 2-D tests, the examples
#            (PASS/FAIL and GB/s), and the fused kernels of the new bench rows alone (a quick look).
#   bench:   the whole anchor bench (fuse, unfused chains, same-bytes copies) -> $OUT/anchors.json.
#   peers:   scripts/peers_v2.py (Triton, torch eager, torch.compile for the new rows) -> $OUT/peers_v2.json
#            ($PEERS: its pattern prefixes, e.g. "qk ce"; default all).
# check's bench rows are $ROWS (FUSE_BENCH_ONLY), default every new row; absent test binaries are skipped.
#   anchors: triton_anchor.py (copied into $BIN from ../shared/anchors; the 24 memory-bound shapes).
# Several modes in one call run in the order given, so fuse and its peers share the call.
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
        [ -x "$BIN/test-tiles_2d" ] && run tiles_2d "$BIN/test-tiles_2d"
        run gpu_examples "$BIN/test-gpu_examples"
        if [ -x "$BIN/test-tiles_2d" ]; then
            run memcheck_tiles_2d compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test-tiles_2d" --test-threads=1
            run racecheck_tiles_2d compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test-tiles_2d" --test-threads=1
        fi
        for e in softmax layernorm qk_norm_rope cross_entropy add_activation; do
            [ -x "$BIN/example-$e" ] && run "example_$e" "$BIN/example-$e"
        done
        FUSE_BENCH_ONLY=${ROWS:-65536x128,16384x256,qk_norm_rope,cross_entropy,add_gelu,add_silu} \
            run bench_new_rows "$BIN/bench-anchors"
        cat "$L/bench_new_rows.log"
        ;;
    bench)
        FUSE_BENCH_JSON=${OUT:-/tmp}/anchors.json run bench "$BIN/bench-anchors"
        cat "$L/bench.log"
        ;;
    peers)
        (cd "${OUT:-/tmp}" && PYTHONUNBUFFERED=1 python "$OLDPWD/scripts/peers_v2.py" ${PEERS:-}) >"$L/peers_v2.log" 2>&1 || status=1
        tail -60 "$L/peers_v2.log"
        ;;
    qksweep)
        # qk_norm_rope over heads per program x warps (the launcher's defaults are 8 heads, 4 warps).
        for h in 4 8 16 32 64; do for w in 1 2 4 8; do
            echo "heads=$h warps=$w: $(FUSE_BENCH_QK_HEADS=$h FUSE_BENCH_WARPS=$w FUSE_BENCH_ONLY=qk_norm_rope \
                "$BIN/bench-anchors" 2>&1 | grep ' fuse ' | awk '{print $1, $3, $5}' | tr '\n' ' ')"
        done; done | tee "$L/qksweep.log"
        ;;
    anchors)
        (cd "${OUT:-/tmp}" && python "$OLDPWD/$BIN/triton_anchor.py") >"$L/triton_anchor.log" 2>&1 || status=1
        tail -40 "$L/triton_anchor.log"
        ;;
    esac
    pack  # after each mode, so a call cut short still returns what it measured
done
echo "status $status"
exit $status
