#!/usr/bin/env bash
# Session 15 on the device (binaries staged by scripts/stage.sh into .gpu/): issue 14's last rows.
# Usage: bash scripts/gpu_session15.sh MODE ...   (modes below; logs and JSON under $OUT)
# Staging here: bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors;
#   cp ../shared/anchors/*.py .gpu/   (carry [".gpu"])
# Next session's first call (the unsigned layout-index change of commit 5ef0847 has not run on a
# GPU): stage gpu_examples, gpu_dot and anchors, then `bash scripts/gpu_session15.sh verify anchors
# peers_rows` (correctness first, then the anchors and rows beside their peers in one call).
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    examples)
        run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    verify) # every example and the tensor-core tests whose kernels use row/column layouts (one config each)
        run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4
        for t in matmul_f16_bf16_f32 matmul_example pipelined_k_loops warpgroup_blocks k_major_b_operands; do
            run dot_$t timeout ${T:-200} env FUSE_TEST_CONFIGS=4 .gpu/test-gpu_dot $t --exact --test-threads=4
        done ;;
    sanitize_ex) # the example kernels new since the last sanitizer run (split/join, prefetch) under memcheck and racecheck
        for t in qk_norm_rope_on_gpu cross_entropy_on_gpu rows_kernels_on_gpu; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
            done
        done ;;
    rows) rows_bench ;;
    peers_rows) peers_rows ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    warps_ab) # the axis-reduction warps rule: the default (16 elements a thread) against 8 warps, 2 rounds
        for round in 1 2; do for w in default 8; do
            T=60 bench ab_${w}_$round .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,layernorm/65536x128,softmax/16384x256,layernorm/16384x256 $([ $w = 8 ] && echo FUSE_BENCH_WARPS=8) >/dev/null
            grep -E " fuse " $L/ab_${w}_$round.log | grep -v "1 row" | sed "s/^/round $round warps $w: /"
        done; done ;;
    ncu_small) # device time and launch facts of fuse's and Triton's kernels at the small anchor shapes, and their SASS
        NCU="ncu --clock-control none --kernel-name regex:^(add_mul|softmax|ln_|layernorm) --launch-count 24 --csv --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,launch__shared_mem_per_block_static,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,smsp__inst_executed.sum"
        run ncu_fuse timeout 200 env FUSE_BENCH_ONLY=add_mul/1048576/float32,softmax/1024x512/float32,layernorm/4096x1024/float32 FUSE_BENCH_JSON=/dev/null $NCU .gpu/bench-anchors
        run ncu_triton timeout 200 $NCU python scripts/small_probe.py
        for f in $(grep -l "add_mul\|softmax\|layernorm" $FUSE_CACHE_DIR/* 2>/dev/null | head -20); do echo "== $f"; cuobjdump -sass $f 2>&1 | grep -E "Function|^\s+/\*[0-9a-f]{4}\*/" ; done >$L/sass_fuse.txt 2>&1
        for f in $(find ~/.triton/cache -name "*.cubin" 2>/dev/null); do echo "== $f"; cuobjdump -sass $f 2>&1 | grep -E "Function|^\s+/\*[0-9a-f]{4}\*/"; done >$L/sass_triton.txt 2>&1
        python3 scripts/ncu_summary.py $L/ncu_fuse.log $L/ncu_triton.log ;;
    probe) # cross-entropy bf16: GPT-2's vocabulary at twice the rows and at aligned rows; GPT-J's warps
        T=120 bench ce_probe .gpu/bench-anchors FUSE_BENCH_ONLY=cross_entropy/4096x50257/bfloat16,cross_entropy/8192x50257,cross_entropy/4096x50264 FUSE_BENCH_CE_PROBE=1 FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/ce_probe.log
        for w in 2 8; do
            T=60 bench qk_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope_gptj FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/qk_w$w.log | sed "s/^/warps $w: /"
        done ;;
    sanitize_final) # memcheck and racecheck on the examples whose launch changed this session
        for t in qk_norm_rope_on_gpu cross_entropy_on_gpu; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-120} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
            done
        done ;;
    ncu_rows) # stall reasons of fuse's and Triton's narrow-row LayerNorm (same tile) and of fuse's cross-entropy bf16
        SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats"
        run ncu_ln_fuse timeout 200 env FUSE_BENCH_ONLY=layernorm/16384x256/float16 FUSE_BENCH_JSON=/dev/null ncu --clock-control none --kernel-name regex:layernorm_rows --launch-skip 2 --launch-count 5 --csv $SECTIONS .gpu/bench-anchors
        run ncu_ln_triton timeout 200 ncu --clock-control none --kernel-name regex:ln_rows_k --launch-skip 2 --launch-count 5 --csv $SECTIONS python scripts/rows_probe.py
        run ncu_ce_fuse timeout 200 env FUSE_BENCH_ONLY=cross_entropy/4096x50257/bfloat16 FUSE_BENCH_JSON=/dev/null ncu --clock-control none --kernel-name regex:cross_entropy --launch-skip 2 --launch-count 3 --csv $SECTIONS .gpu/bench-anchors
        python3 scripts/ncu_summary.py $L/ncu_ln_fuse.log $L/ncu_ln_triton.log $L/ncu_ce_fuse.log ;;
    occupancy_ab) # kernels without tensor-core work bounded to full occupancy (the default) against FUSE_MIN_BLOCKS=0 (ptxas's choice)
        ONLY=65536x128,16384x256,cross_entropy/4096x50257/bfloat16,cross_entropy/8192x32000/bfloat16,cross_entropy/4096x128256/bfloat16,qk_norm,add_mul/1048576/,softmax/1024x512/,layernorm/4096x1024/
        for round in 1 2; do for mb in default 0; do
            T=90 bench occ_${mb}_$round .gpu/bench-anchors FUSE_BENCH_ONLY=$ONLY $([ $mb = 0 ] && echo FUSE_MIN_BLOCKS=0) >/dev/null
            grep -E " fuse " $L/occ_${mb}_$round.log | sed "s/^/round $round bound $mb: /"
        done; done ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
