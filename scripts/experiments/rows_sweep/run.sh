#!/usr/bin/env bash
# Session 22 on the device: the narrow-row tile x warps sweep against torch.compile (rows_sweep.py),
# then Nsight Compute on torch.compile's kernels (grid, block, registers). Sources in .gpu/sweep
# (the emitted CUDA of each variant with every launch fact proven: rows_sources.rs, the
# `rows_sources` example, since session 23; session 22 used an untracked probe).
source scripts/gpu_common.sh
session_start
mkdir -p $O/cub && cp .gpu/sweep/*.cu $O/cub/
NVRTC=$(ls /usr/local/cuda/lib64/libnvrtc.so* | head -1)
S=$PWD/scripts/experiments/rows_sweep
(cd $O/cub && CUBIN=1 python3 $S/nvrtc_regs.py $NVRTC *.cu && \
  MINB=16 CUBIN=1 python3 $S/nvrtc_regs.py $NVRTC softmax_float32_8x256_w4.cu softmax_float32_16x128_w4.cu layernorm_float32_16x128_w4.cu && \
  MINB=12 CUBIN=1 python3 $S/nvrtc_regs.py $NVRTC layernorm_float32_8x256_w4.cu) >$L/compile.log 2>&1 || status=1
tail -4 $L/compile.log
py rows_sweep 480 scripts/experiments/rows_sweep/rows_sweep.py $O/cub ${ONLY:-}
cp -f $O/rows_sweep.json $L/ 2>/dev/null; grep -E "==|vs|Error|assert" $L/rows_sweep.log | head -150
pack_logs
NCU=1 run ncu_tc timeout 240 ncu --clock-control none --csv --kernel-name regex:'triton' \
    --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size \
    python scripts/experiments/rows_sweep/rows_sweep.py $O/cub
grep -E "triton" $L/ncu_tc.log | awk -F'","' '{print $5, $(NF-2), $NF}' | sort | uniq -c | head -60
pack_logs
session_end
