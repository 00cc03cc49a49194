#!/usr/bin/env bash
# Session 18 on the device (tests and bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session18.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    verify) run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    sanitize_sigmoid) # memcheck on the kernels that call fuse_sigmoid (both of its branches)
        for t in sigmoid_is_within add_activation_on_gpu; do
            run memcheck_$t timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
    harness) # hand-edited LayerNorm f32 16384x256 kernels (scripts/experiments/slab/gen18) beside torch.compile's cubin:
        # per call after a memset, a kernel flush, and a memset then the same kernel on other rows (code warm, data cold)
        INDUCTOR_DIR=scripts/experiments/slab/gen18/ind run h18 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen18 256
        grep -E "^(inductor|check|percall|time)" $L/h18.log ;;
    rows) # the rows in question beside the same-bytes copy, twice
        for r in 1 2; do
            T=200 bench rows_$r .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128/float32,16384x256/float32,add_silu,add_gelu FUSE_BENCH_WITH_COPY=1 >/dev/null
            grep -E " fuse |copy" $L/rows_$r.log | sed "s/^/round $r: /"
        done ;;
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    peers) PEERS="${PEERS:-layernorm softmax add}" peers_rows ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    esac
    tar czf $O/logs.tgz -C $O logs
done
rm -rf $L
exit $status
