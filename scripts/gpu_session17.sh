#!/usr/bin/env bash
# Session 17 on the device (bench staged by scripts/stage.sh into .gpu/).
# Staging: bash scripts/stage.sh -p fuse --bench anchors; cp ../shared/anchors/*.py .gpu/
# Final calls: bash scripts/gpu_session17.sh anchors peers_all; then rows_all peers_all (a second round).
# Usage: bash scripts/gpu_session17.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    slab) # hand-edited narrow-row LayerNorm f32 kernels (scripts/experiments/slab): layouts x tiles x warps
        run slab bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen
        grep -E "^(check|percall|time)" $L/slab.log ;;
    early) # LayerNorm f32 rows with the weight and bias loaded first (hand-made variants, scripts/experiments/slab)
        run early256 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen256 256
        run early128 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen128 128
        grep -E "^(check|percall|time)" $L/early256.log $L/early128.log ;;
    flush) # LayerNorm f32 16384x256 tiles x warps, per call after a memset flush and after a kernel flush (dirty L2)
        run flush256 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen256 256
        grep -E "^(check|percall|time)" $L/flush256.log ;;
    inductor_ab) # torch.compile's LayerNorm cubin timed by main.cu beside fuse's kernels, both flushes
        (cd $O && TRITON_CACHE_DIR=$O/tcache timeout 300 python $OLDPWD/scripts/experiments/slab/inductor_cubin.py $O/ind) >$L/inductor_cubin.log 2>&1; echo "inductor_cubin rc $?"
        cat $L/inductor_cubin.log | tail -8; find $O/tcache -name "triton_per_fused_native_layer_norm*.json" -exec sh -c 'echo "$1: $(head -c 600 $1)"' _ {} \; | head -12; cp $O/ind/inductor_ln.meta $L/ 2>/dev/null
        INDUCTOR_DIR=$O/ind run ind256 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen256 256
        grep -E "^(inductor|check|percall|time)" $L/ind256.log ;;
    inductor_cubin) # the same with the cubin fetched before (scripts/experiments/slab/gen256/ind, carried)
        INDUCTOR_DIR=scripts/experiments/slab/gen256/ind run ind256 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen256 256
        grep -E "^(inductor|check|percall|time)" $L/ind256.log ;;
    sigmoid) # the reciprocal fast path against the IEEE division on every float in [1, 2^126), then
        # the sigmoid without a slow-path call (new) against ea42d04 (old) on the add rows, 3 alternating rounds
        run rcp_check bash -c "nvcc -O3 -arch=sm_90 -o /tmp/rcp_check scripts/experiments/sigmoid/rcp_check.cu && /tmp/rcp_check"
        grep mismatches $L/rcp_check.log
        for round in 1 2 3; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=120 bench sig_${v}_$round $bin FUSE_BENCH_ONLY=add_silu,add_gelu >/dev/null
            grep -E " fuse " $L/sig_${v}_$round.log | grep -v "unfused" | sed "s/^/round $round $v: /"
        done; done ;;
    ncu_ln) # Nsight Compute on fuse's and torch.compile's LayerNorm 16384x256 f32 (cache flushed per launch)
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
        secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
        FUSE_BENCH_ONLY=layernorm/16384x256/float32 timeout 200 $NCU --kernel-name "regex:layernorm_rows_f32" --launch-skip 20 --launch-count 4 --cache-control all --clock-control none $secs .gpu/bench-anchors >$L/ncu_fuse_ln.txt 2>&1; echo "ncu fuse rc $?"
        [ -z "${SKIP_INDUCTOR:-}" ] && timeout 300 $NCU --profile-from-start off --kernel-name "regex:triton_per_fused_native_layer_norm" --cache-control all --clock-control none $secs python scripts/experiments/slab/ln_inductor.py >$L/ncu_inductor_ln.txt 2>&1; echo "ncu inductor rc $?"; [ -n "${SKIP_INDUCTOR:-}" ] && : 
        grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|Memory Throughput|Waves Per SM|Issue Slots Busy|L2 Hit" $L/ncu_fuse_ln.txt $L/ncu_inductor_ln.txt | head -120 ;;
    rows) # the rows in question beside the same-bytes copy, twice
        for r in 1 2; do
            T=200 bench rows_$r .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128/float32,16384x256/float32,add_silu,add_gelu FUSE_BENCH_WITH_COPY=1 >/dev/null
            grep -E " fuse |copy" $L/rows_$r.log | sed "s/^/round $r: /"
        done ;;
    rows_sweep) # the narrow f32 rows at other tiles and warps
        for tile in 1024 2048 4096; do for w in 2 4 8; do
            T=100 bench sweep_${tile}_$w .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128/float32,16384x256/float32 FUSE_ROWS_TILE=$tile FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/sweep_${tile}_$w.log | sed "s/^/tile $tile warps $w: /"
        done; done ;;
    verify) run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    sanitize_stats) # memcheck and racecheck on row_stats alone (slabs on 1-8 warps)
        for tool in memcheck racecheck; do
            run ${tool}_row_stats timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples row_stats_on_gpu --test-threads=1
        done ;;
    sanitize_slab) # memcheck and racecheck on the kernels that take warp slabs
        for t in row_stats_on_gpu rows_kernels_on_gpu; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
            done
        done ;;
    slab_ab) # warp slabs (new) against the committed emitter (old: bench-anchors-old), alternating, 3 rounds
        for round in 1 2 3; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=120 bench slab_${v}_$round $bin FUSE_BENCH_ONLY=16384x256/float32,65536x128/float32 >/dev/null
            grep -E " fuse " $L/slab_${v}_$round.log | grep -v "unfused" | sed "s/^/round $round $v: /"
        done; done ;;
    slab_sweep) # the 256-column f32 rows at other tiles and warps, slabs against the old emitter
        for tile in 1024 2048 4096; do for w in 2 4 8; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=100 bench sw_${v}_${tile}_$w $bin FUSE_BENCH_ONLY=16384x256/float32 FUSE_ROWS_TILE=$tile FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/sw_${v}_${tile}_$w.log | sed "s/^/tile $tile warps $w $v: /"
        done; done; done ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    rows_all) rows_bench ;; # issue 14's rows alone beside the copy ($L/rows.log)
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    peers) PEERS="${PEERS:-layernorm softmax add}" peers_rows ;;
    inductor) # the configs torch.compile's autotuner chose (its cache's .best_config files) and the kernels
        mkdir -p $L/inductor
        for f in $(grep -l -r "persistent_reduction\|pointwise" /tmp/torchinductor_* --include=*.py 2>/dev/null | head -40); do
            cp $f $L/inductor/ 2>/dev/null; b=${f%.py}; cp $b.best_config $L/inductor/ 2>/dev/null
        done
        find /tmp/torchinductor_* -name "*.best_config" -exec sh -c 'echo "$1: $(cat $1)"' _ {} \; > $L/inductor/best_configs.txt 2>/dev/null
        wc -l $L/inductor/best_configs.txt; head -40 $L/inductor/best_configs.txt ;;
    esac
    tar czf $O/logs.tgz -C $O logs
done
exit $status
