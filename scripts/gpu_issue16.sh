#!/usr/bin/env bash
# Issue 16 (attention in the language) on the device, over binaries staged by scripts/stage.sh:
#   bash scripts/stage.sh -p fuse --test gpu_attention --example attention --bench matmul   (carry [".gpu"])
# Usage: bash scripts/gpu_issue16.sh check|all_configs|sanitize|bench|peers ...  (in the order given)
#   check:       the default configuration's GPU tests (f16/bf16, d 64/128, causal, GQA, dropout,
#                ragged n) and the attention example (which also times b4 h32 n4096 d128).
#   all_configs: the GPU tests of every other configuration.
#   sanitize:    compute-sanitizer memcheck, racecheck and synccheck over the default configuration.
#   bench:       benches/matmul.rs's attention rows -> $OUT/attention.json (FUSE_BENCH_ONLY narrows).
#   peers:       triton_dot.py and torch_peers.py (same call) -> $OUT/triton_dot.json, torch_peers.json.
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
        run gpu_attention "$BIN/test-gpu_attention" attention_default_config
        run example_attention "$BIN/example-attention"
        grep "TFLOP/s" "$L/example_attention.log"
        ;;
    all_configs)
        run gpu_attention_configs "$BIN/test-gpu_attention" attention_other_configs
        ;;
    sanitize)
        for tool in memcheck racecheck synccheck; do
            run ${tool}_attention compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test-gpu_attention" attention_default_config --test-threads=1
        done
        ;;
    bench)
        FUSE_BENCH_ONLY=${FUSE_BENCH_ONLY:-attention_fwd} FUSE_BENCH_JSON=${OUT:-/tmp}/attention.json run bench_attention "$BIN/bench-matmul"
        grep -E "^attention_fwd .* fuse  " "$L/bench_attention.log"
        ;;
    peers)
        (cd "${OUT:-/tmp}" && python "$OLDPWD/$BIN/triton_dot.py") >"$L/triton_dot.log" 2>&1 || status=1
        grep attention "$L/triton_dot.log"
        cp -f ../shared/anchors/torch_peers.py "$BIN/" 2>/dev/null
        [ -f "$BIN/torch_peers.py" ] && { (cd "${OUT:-/tmp}" && python "$OLDPWD/$BIN/torch_peers.py") >"$L/torch_peers.log" 2>&1 || status=1; grep attention "$L/torch_peers.log"; }
        ;;
    esac
    pack
done
echo "status $status"
exit $status
