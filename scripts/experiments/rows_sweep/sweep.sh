# Sourced by the session scripts after scripts/gpu_common.sh (sessions 22-23): emitted narrow-row
# sources compiled by the device's NVRTC and timed or profiled beside torch.compile.
S=$PWD/scripts/experiments/rows_sweep
NVRTC=$(ls /usr/local/cuda/lib64/libnvrtc.so* | head -1)
compile_folder() { # $1: folder of .cu -> $O/cub/*.cubin, ptxas's registers in $L/compile_<name>.log
    rm -rf $O/cub && mkdir -p $O/cub && cp $1/*.cu $O/cub/
    (cd $O/cub && CUBIN=1 python3 $S/nvrtc_regs.py $NVRTC *.cu) >$L/compile_$(basename $1).log 2>&1 || status=1
}
sweep() { # $1: folder; cases matching $ONLY timed against torch.compile (rows_sweep.py); torch.compile's
    # code, Triton's PTX and SASS of its kernels kept in $L/inductor.tgz
    compile_folder $1
    rm -f $O/rows_sweep.json
    TRITON_CACHE_DIR=$O/tcache TORCHINDUCTOR_CACHE_DIR=$O/icache py sweep_$(basename $1) 540 scripts/experiments/rows_sweep/rows_sweep.py $O/cub ${ONLY:-}
    cp -f $O/rows_sweep.json $L/sweep_$(basename $1).json 2>/dev/null
    grep -E "==|vs|Error|assert" $L/sweep_$(basename $1).log | head -100
    (cd $O && for c in $(find tcache -name "*.cubin"); do echo "== $c"; cuobjdump -sass $c; done >tcache/sass.txt 2>&1
     find tcache icache -name "*.ptx" -o -name "*.py" -o -name "*.ttgir" -o -name "*.json" -o -name sass.txt | tar czf $L/inductor.tgz -T -) 2>/dev/null
    rm -rf $O/cub $O/tcache $O/icache
}
ncu_all() { # $1: folder; Nsight Compute sections of every side (fuse's cubins and torch.compile's kernels), cases $ONLY
    compile_folder $1
    NCU=all run ncu_$(basename $1) timeout ${T:-300} ncu --clock-control none --csv --kernel-name regex:'triton|layernorm_rows' \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section SchedulerStats --section WarpStateStats python $S/rows_sweep.py $O/cub ${ONLY:-}
    rm -rf $O/cub
}
