#!/usr/bin/env bash
# Session 16 on the device (binaries staged by scripts/stage.sh into .gpu/; an A/B's "old" bench
# staged as .gpu/bench-anchors-old: ff9a32d's emitter for head_ab, the committed one for vec_ab).
# Staging: bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors; cp ../shared/anchors/*.py .gpu/
# Next session's first call, e.g.: bash scripts/gpu_session16.sh examples anchors peers_rows
# Usage: bash scripts/gpu_session16.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
ONLY_HEAD=65536x128,16384x256,layernorm/4096x1024,layernorm/8192x8192,layernorm/4096x4096,layernorm/32768x768,qk_norm,bias_gelu_dropout
for mode in "$@"; do
    case $mode in
    examples) run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    verify) # every example (split/join's fallback included) and the tensor-core tests whose kernels use row/column layouts
        run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4
        for t in matmul_f16_bf16_f32 matmul_example pipelined_k_loops warpgroup_blocks k_major_b_operands; do
            run dot_$t timeout ${T:-200} env FUSE_TEST_CONFIGS=4 .gpu/test-gpu_dot $t --exact --test-threads=4
        done ;;
    final_sanitize) # memcheck and racecheck on the cross-entropy test (the kernel now keeps a max per run of 8)
        for tool in memcheck racecheck; do
            run ${tool}_ce timeout ${T:-300} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples cross_entropy_on_gpu --test-threads=1
        done ;;
    sanitize) # memcheck and racecheck on split/join (both lowerings), the rows kernels (the head placement) and cross-entropy
        for t in split_join_on_gpu rows_kernels_on_gpu cross_entropy_on_gpu; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
            done
        done ;;
    head_ab) # uniform slow-path calls at the kernel head (new) against ff9a32d (old), alternating, 2 rounds
        for round in 1 2; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=150 bench ab_${v}_$round $bin FUSE_BENCH_ONLY=$ONLY_HEAD >/dev/null
            grep -E " fuse " $L/ab_${v}_$round.log | grep -v "unfused\|rand16" | sed "s/^/round $round $v: /"
        done; done ;;
    ce_examples) # the cross-entropy GPU test, then under memcheck and racecheck
        run ce_gpu timeout ${T:-300} .gpu/test-gpu_examples cross_entropy_on_gpu --test-threads=1
        for tool in memcheck racecheck; do
            run ${tool}_ce timeout ${T:-300} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples cross_entropy_on_gpu --test-threads=1
        done ;;
    ce_rows) # the cross-entropy rows beside the same-bytes copy
        T=120 bench ce_rows .gpu/bench-anchors FUSE_BENCH_ONLY=cross_entropy FUSE_BENCH_WITH_COPY=1 >/dev/null
        grep -E " fuse |copy" $L/ce_rows.log ;;
    vec_ab) # rows 32-64 vectors wide in chunks of two vectors (new) against one (old: bench-anchors-old), alternating, 2 rounds
        for round in 1 2; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=120 bench vec_${v}_$round $bin FUSE_BENCH_ONLY=65536x128,16384x256 >/dev/null
            grep -E " fuse " $L/vec_${v}_$round.log | grep -v "unfused" | sed "s/^/round $round $v: /"
        done; done ;;
    sanitize_rows) # memcheck and racecheck on the rows kernels
        for tool in memcheck racecheck; do
            run ${tool}_rows timeout ${T:-240} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_examples rows_kernels_on_gpu --test-threads=1
        done ;;
    sanitize_head) # memcheck on the kernels the head placement changed (qk_norm_rope, narrow rows, f16 dropout, generic half kernels), racecheck on the first two
        for t in qk_norm_rope_on_gpu rows_kernels_on_gpu dropout_masks_are_bit generic_kernels_in_half; do
            run memcheck_$t timeout ${T:-120} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done
        for t in qk_norm_rope_on_gpu rows_kernels_on_gpu; do
            run racecheck_$t timeout ${T:-120} compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    peers_rows) peers_rows ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
