#!/usr/bin/env bash
# LayerNorm f16 probe on the lent GPU (binaries staged in .gpu/): a full bench + Triton anchor run,
# then the LayerNorm kernels alone at several num_warps (alternated, REPS times), then Nsight Compute
# (speed of light, occupancy, warp stalls, memory) on one f16 4096x4096 launch per warps setting,
# then the element-wise f16 add_mul at several block sizes (Nsight Compute and the block sizes on
# .gpu/test-anchors only). Every result under $OUT.
unset FUSE_BENCH_WARPS  # the full bench below must run every implementation
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ "${PROBE_FULL:-1}" = 1 ] && bash scripts/gpu_check.sh bench triton
for rep in $(seq 1 "${REPS:-2}"); do
  for w in ${LN_WARPS:-2 4 8 16}; do
    for b in .gpu/*-anchors; do
      # warps "default": the runtime's own choice
      if [ "$w" = default ]; then unset FUSE_BENCH_WARPS; else export FUSE_BENCH_WARPS=$w; fi
      FUSE_BENCH_ONLY=${LN_ONLY:-layernorm} FUSE_BENCH_JSON="$OUT/$(basename "$b")-ln_w${w}_r$rep.json" \
        "$b" >/dev/null 2>&1; echo "$(basename "$b") ${LN_ONLY:-layernorm} warps $w rep $rep: exit $?"
    done
  done
done
unset FUSE_BENCH_WARPS
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
if [ -n "$NCU" ] && [ "${PROBE_NCU:-1}" = 1 ]; then
  for w in ${NCU_WARPS:-4 8}; do
    FUSE_BENCH_ONLY=layernorm/4096x4096/float16 FUSE_BENCH_WARPS=$w timeout 200 "$NCU" --kernel-name "regex:^layernorm_f16\$" \
      --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      .gpu/test-anchors >"$OUT/ncu-ln16-4096sq-w$w.txt" 2>&1
    echo "ncu warps $w: exit $?"
  done
fi
for eb in ${EW_BLOCKS:-1024 2048 4096}; do
  FUSE_BENCH_ONLY=add_mul FUSE_BENCH_EW_BLOCK=$eb FUSE_BENCH_JSON="$OUT/ew_b$eb.json" .gpu/test-anchors >/dev/null 2>&1
  echo "add_mul block $eb: exit $?"
done
