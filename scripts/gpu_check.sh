#!/usr/bin/env bash
# Runs on the lent GPU machine over binaries staged by ../shared/gpu/stage (carry: [".gpu"]).
# Usage: bash scripts/gpu_check.sh [examples] [tests | gputests] [bench] [cache] [triton]
#   [profile]  (default: examples tests bench triton; gputests: only the GPU test binaries, not the
#   NVRTC/CPU ones; profile: Nsight Compute sections for the f16 kernels, where ncu is permitted)
# Logs go to $OUT; a short summary is printed last.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
want=${*:-examples tests bench triton}
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u | tee -a "$OUT/device.txt"
has() { [[ " $want " == *" $1 "* ]]; }
# One test binary, its log under $OUT, a summary line.
run_test() {
  local name; name=$(basename "$1")
  if "$1" --include-ignored --test-threads 1 >"$OUT/$name.log" 2>&1; then r=PASS; else r="FAIL($?)"; fi
  summary+=("$name: $r $(grep -E '^test result' "$OUT/$name.log" | tail -1)")
}
if has examples; then
  for bin in .gpu/example-*; do
    ex=${bin#.gpu/example-}
    if .gpu/example-$ex >"$OUT/example-$ex.log" 2>&1; then r=PASS; else r="FAIL($?)"; fi
    summary+=("example $ex: $r")
    grep -E "device:|GB/s|FAIL|err" "$OUT/example-$ex.log" | head -40
  done
fi
if has tests; then
  for t in .gpu/test-*; do
    case "$t" in *test-ui|*test-fuse_macros|*-anchors|*-patterns|*-cache) continue;; esac  # cargo-only or benches
    run_test "$t"
  done
fi
if has gputests; then
  for t in .gpu/test-gpu .gpu/test-gpu_examples; do run_test "$t"; done
fi
if has cache; then
  .gpu/test-cache >"$OUT/cache.log" 2>&1; summary+=("cache bench: exit $?")
  cat "$OUT/cache.log"
fi
if has bench; then
  for b in .gpu/*-anchors; do
    [ -x "$b" ] || continue
    name=$(basename "$b")
    FUSE_BENCH_JSON="$OUT/$name.json" "$b" --bench >"$OUT/$name.log" 2>&1; summary+=("$name: exit $?")
    grep -E "overhead|^device" "$OUT/$name.log"
  done
fi
if has profile; then
  # Nsight Compute on one launch of each slow kernel (when ncu exists and counters are permitted).
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  if [ -n "$NCU" ]; then
    for spec in "example-bias_gelu_dropout:bias_gelu_dropout_f16" "example-layernorm:layernorm_f16" "example-softmax:softmax_f16"; do
      bin=${spec%%:*}; k=${spec##*:}
      timeout 120 "$NCU" --kernel-name "regex:^${k}\$" --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
        ".gpu/$bin" >"$OUT/ncu-$k.txt" 2>&1; summary+=("ncu $k: exit $?")
    done
  else
    summary+=("profile: no ncu on this machine")
  fi
fi
if has triton; then
  PYTHONUNBUFFERED=1 python3 .gpu/triton_anchor.py >"$OUT/triton.log" 2>&1; summary+=("triton_anchor: exit $?")
  grep -E "overhead" "$OUT/triton.log"
fi
printf '%s\n' "== summary ==" "${summary[@]}"
