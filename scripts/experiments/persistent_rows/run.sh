#!/usr/bin/env bash
# Build and run the persistent-vs-plain row-kernel experiment (LayerNorm f16, softmax f32/f16) on the GPU machine.
# Output: $OUT/persistent_rows.txt (table + summaries), $OUT/ptxas.txt (ptxas -v register/spill report).
set -u
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-/tmp/persistent_rows_ln}
R="$OUT/persistent_rows.txt"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv 2>&1
  nvcc --version | tail -2
} > "$R"
t0=$(date +%s)
nvcc -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o "$BIN" "$D/ln.cu" 2> "$OUT/ptxas.txt"
rc=$?
echo "# compile rc=$rc in $(( $(date +%s) - t0 )) s" >> "$R"
[ $rc -ne 0 ] && { tail -40 "$OUT/ptxas.txt" >> "$R"; exit $rc; }
timeout "${RUN_TIMEOUT:-480}" "$BIN" "${1:-all}" >> "$R" 2>&1
echo "# run rc=$?" >> "$R"
cat "$R" | tail -60
