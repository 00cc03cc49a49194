#!/usr/bin/env bash
# Session 21 on the device (bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors
#          && bash scripts/stage.sh -p fuse-runtime --test gpu; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session21.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
SHORT="add_mul/1048576/float32 add_mul/1048576/float16 softmax/1024x512/float32 softmax/1024x512/float16 layernorm/4096x1024/float32 layernorm/4096x1024/float16"
for mode in "$@"; do
    case $mode in
    same) # each short anchor in its own bench process with its own cubin cache (fuse's harness), then
        # those cubins in Triton's harness beside Triton's kernels (scripts/same_harness.py), then the
        # bench processes again
        for round in 1 2; do
            cubin_cases rust_$round $SHORT
            if [ $round = 1 ]; then
                rm -f $O/same_harness.json
                py same_harness 300 scripts/same_harness.py $O/cubins
                cp -f $O/same_harness.json $L/ 2>/dev/null; grep -E "fuse|Error|assert" $L/same_harness.log | head -20
            fi
        done ;;
    ncu) # Nsight Compute on the same kernels, both sides, in Triton's harness (boost clocks kept); needs
        # mode `same` earlier in the same call (its cubins)
        run ncu_same timeout 300 ncu --clock-control none --csv --kernel-name regex:'^(add_mul|softmax|layernorm|ln_1row)' \
            --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,launch__grid_size,launch__block_size \
            python scripts/same_harness.py $O/cubins ncu
        python3 scripts/ncu_summary.py --runs $L/ncu_same.log >$L/ncu_same.txt; cat $L/ncu_same.txt ;;
    cs_ab) # streaming cache hints (evict-first loads, stores, both; a temporary patch that reads
        # FUSE_EXP_DEFINES, reverted after) on the streaming rows, 2 alternated rounds, with
        # torch.compile's add rows (peers_v2.py) between them
        grep -q FUSE_EXP_DEFINES .gpu/bench-anchors || { echo "cs_ab needs the FUSE_EXP_DEFINES patch"; status=1; continue; }
        for round in 1 2; do
            for v in base FUSE_EXP_LD_CS FUSE_EXP_ST_CS FUSE_EXP_LD_CS,FUSE_EXP_ST_CS; do
                d=$v; [ $v = base ] && d=""
                T=150 bench cs_${round}_${v//,/+} .gpu/bench-anchors FUSE_BENCH_ONLY=add_gelu,add_silu,add_mul/67108864,bias_gelu FUSE_BENCH_WITH_COPY=1 FUSE_EXP_DEFINES=$d >/dev/null
                grep -E " fuse  " $L/cs_${round}_${v//,/+}.log | sed "s/^/$round $v: /"
            done
            PEERS=add_gelu peers_rows >/dev/null; cp -f $L/peers_v2.json $L/peers_add_$round.json; cp -f $L/peers_v2.log $L/peers_add_$round.log
            grep -E "torch.compile|copy" $L/peers_add_$round.log | tail -6
        done ;;
    memcheck_runtime) # the runtime's GPU tests under memcheck (API errors not listed: the runtime probes
        # modules for an optional symbol, a CUDA_ERROR_NOT_FOUND memcheck would list)
        run memcheck_runtime timeout ${T:-300} compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 .gpu/test-gpu --test-threads=1 ;;
    *) common_mode $mode || { echo "unknown mode $mode"; status=1; } ;; # verify, anchors, peers_all, short_rounds, add_rounds, rows_rounds, same_rows (gpu_common.sh)
    esac
    pack_logs
done
session_end
