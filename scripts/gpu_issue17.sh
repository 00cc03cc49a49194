#!/usr/bin/env bash
# Issue 17 on the device (no cargo there), over binaries staged by scripts/stage.sh into .gpu/
# (carry: [".gpu"]); see the stage command at the end of this comment.
# Usage: bash scripts/gpu_issue17.sh check dropout roofline [matmul] [anchors]
#   check:    the GPU tests (tests/gpu_examples.rs: rand16 and bias_gelu_dropout16 against the CPU
#             interpreter and fuse_ir::philox lane for lane, beside every existing GPU test) and the
#             bias_gelu_dropout example (rand and rand16, f32 and f16, PASS/FAIL, GB/s).
#   dropout:  bias+GELU+dropout alone from the anchor bench: "fuse" (rand), "fuse rand16" and the
#             same-bytes copy, on the anchor shapes, twice -> $OUT/dropout{1,2}.json; prints each
#             fused row's share of its copy.
#   roofline: the whole anchor bench with FUSE_BENCH_JSON -> $OUT/anchors.json and, beside it,
#             anchors.roofline.svg / anchors.roofline.md (ceilings measured in the same run).
#   matmul:   the matmul bench (FUSE_BENCH_CONFIGS=${CONFIGS:-0,1} to keep it short) ->
#             $OUT/matmul.json, matmul.roofline.svg / .md.
#   anchors:  Triton's peer, python3 .gpu/triton_anchor.py (staged from ../shared/anchors), for
#             its bias_gelu_dropout rows -> logs/triton_anchor.log and logs/triton_anchors.json.
# Each mode packs $OUT/issue17.tgz (logs, JSON, SVG, Markdown) when it ends, so a call cut short
# still returns what it measured.
#
# Stage (on the build machine, from the repository root, CARGO_TARGET_DIR as you like):
#   rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --example bias_gelu_dropout \
#       --bench anchors --bench matmul && cp ../shared/anchors/triton_anchor.py .gpu/
set -uo pipefail
BIN=${BIN:-.gpu}
. "$(dirname "$0")/gpu_common.sh"
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$L/device.txt"
date -u | tee -a "$L/device.txt"
pack() {
    cp -f "$O"/*.json "$O"/*.svg "$O"/*.md "$L/" 2>/dev/null
    tar czf "$O/issue17.tgz" -C "$(dirname "$L")" logs
}
# Per shape and dtype: each fused row's GB/s over the copy's (JSON rows of the anchor bench).
shares() {
    python3 - "$1" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
copy = {(r["pattern"], str(r["shape"]), r["dtype"]): r["gbs"] for r in rows if r["impl"] == "fuse copy (d2d)"}
for r in rows:
    k = (r["pattern"], str(r["shape"]), r["dtype"])
    if r["impl"].startswith("fuse") and "copy" not in r["impl"] and "unfused" not in r["impl"] and k in copy:
        print(f"{r['pattern']:<18} {r['shape']:<11} {r['dtype']:<8} {r['impl']:<20} {r['gbs']:7.0f} GB/s  {r['gbs'] / copy[k]:.3f} of copy")
PY
}
for mode in "$@"; do
    case $mode in
    check)
        run gpu_examples "$BIN/test-gpu_examples"
        grep -E "rand16|dropout16" "$L/gpu_examples.log" | head
        run example_bias_gelu_dropout "$BIN/example-bias_gelu_dropout"
        ;;
    dropout)
        for i in 1 2; do
            FUSE_BENCH_ONLY=bias_gelu_dropout FUSE_BENCH_WITH_COPY=1 FUSE_BENCH_JSON=$O/dropout$i.json \
                run "dropout$i" "$BIN/bench-anchors"
            shares "$O/dropout$i.json" | tee "$L/dropout$i.shares.txt"
        done
        ;;
    roofline)
        FUSE_BENCH_JSON=$O/anchors.json run anchors_bench "$BIN/bench-anchors"
        sed -n '/Roofline ceilings/,$p' "$L/anchors_bench.log" | head -80
        shares "$O/anchors.json" > "$L/anchors.shares.txt"; grep bias_gelu "$L/anchors.shares.txt"
        ;;
    matmul)
        FUSE_BENCH_CONFIGS=${CONFIGS:-0,1} FUSE_BENCH_JSON=$O/matmul.json run matmul_bench "$BIN/bench-matmul"
        sed -n '/Roofline ceilings/,$p' "$L/matmul_bench.log" | head -40
        ;;
    anchors)
        # It writes $OUT/anchors.json: give it a folder of its own so fuse's anchors.json stays.
        mkdir -p "$O/triton"
        (cd "$O" && OUT=$O/triton python3 "$OLDPWD/$BIN/triton_anchor.py") >"$L/triton_anchor.log" 2>&1 || status=1
        cp -f "$O/triton/anchors.json" "$L/triton_anchors.json" 2>/dev/null
        grep -i -E "dropout|copy" "$L/triton_anchor.log" | head -20
        ;;
    *) echo "unknown mode $mode"; status=1 ;;
    esac
    pack
done
echo "status $status"
exit $status
