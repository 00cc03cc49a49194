#!/usr/bin/env bash
# Tuning sweep on the lent GPU: the fused kernels of the anchor bench at each num_warps (JSON per
# setting under $OUT), the cache bench, and the four newer examples. Staged binaries in .gpu/.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
for ex in add_rmsnorm silu_and_mul layernorm_quant l2norm; do .gpu/example-$ex 2>&1 | grep -Ev "^inputs"; done
.gpu/*-cache 2>&1 | tee "$OUT/cache.log"
for w in ${WARPS:-1 2 4 8 16 32}; do
  FUSE_BENCH_WARPS=$w FUSE_BENCH_JSON="$OUT/w$w.json" .gpu/*-anchors >/dev/null 2>&1; echo "warps $w: exit $?"
done
