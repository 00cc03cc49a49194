#!/usr/bin/env bash
# Tuning sweep on the lent GPU over binaries staged in .gpu/ (fused kernels only; JSON per setting
# under $OUT): element-wise block size x num_warps, then num_warps for the row kernels.
# Then (unless SWEEP_NCU=0) Nsight Compute per-instruction counts (SASS) for one large launch of
# the slowest kernels.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
for eb in ${EW_BLOCKS:-1024 2048 4096}; do
  for w in ${EW_WARPS:-2 4 8 16}; do
    FUSE_BENCH_ONLY=add_mul,bias_gelu_dropout FUSE_BENCH_EW_BLOCK=$eb FUSE_BENCH_WARPS=$w \
      FUSE_BENCH_JSON="$OUT/ew_b${eb}_w$w.json" .gpu/test-anchors >/dev/null 2>&1; echo "ew block $eb warps $w: exit $?"
  done
done
for w in ${ROW_WARPS:-1 2 4 8 16}; do
  FUSE_BENCH_ONLY=softmax,layernorm FUSE_BENCH_WARPS=$w FUSE_BENCH_JSON="$OUT/row_w$w.json" .gpu/test-anchors >/dev/null 2>&1
  echo "row warps $w: exit $?"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
if [ -n "$NCU" ] && [ "${SWEEP_NCU:-1}" = 1 ]; then
  for spec in "bias_gelu_dropout/16384x8192/float16:bias_gelu_dropout_f16" "layernorm/32768x768/float16:layernorm_f16"; do
    case=${spec%%:*}; k=${spec##*:}
    FUSE_BENCH_ONLY=$case timeout 200 "$NCU" --kernel-name "regex:^${k}\$" --launch-skip 3 --launch-count 1 \
      --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis \
      --page source --print-source sass --csv .gpu/test-anchors >"$OUT/ncu-src-$k.csv" 2>&1
    echo "ncu $k: exit $?"
  done
fi
