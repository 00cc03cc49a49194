#!/usr/bin/env bash
# Session 20 on the device (tests and bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors
#          && bash scripts/stage.sh -p fuse-runtime --test gpu; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session20.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    verify) # every GPU test: the runtime's (page-aligned buffers among them) and the examples'
        run gpu_runtime timeout ${T:-200} .gpu/test-gpu --test-threads=4
        run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    sanitize) # memcheck over the runtime's buffer paths and the short anchors' example kernels (the runtime
        # probes modules for an optional symbol, a CUDA_ERROR_NOT_FOUND memcheck would list as an API error)
        run memcheck_runtime timeout ${T:-300} compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 .gpu/test-gpu --test-threads=1
        for t in add_mul softmax_and rows_kernels; do
            run memcheck_$t timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
    align_rounds) # the short anchors with page-aligned buffers (the default), with the pool's placement
        # (FUSE_PAGE_ALIGN=0) and Triton's (peers_small.py), one process each, alternated, 3 rounds
        only=add_mul/1048576,softmax/1024x512,layernorm/4096x1024
        a="" p="" t=""
        for k in 1 2 3; do
            T=150 bench al_fuse_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only FUSE_BENCH_PTRS=1 >/dev/null
            T=150 bench al_pool_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only FUSE_BENCH_PTRS=1 FUSE_PAGE_ALIGN=0 >/dev/null
            (cd $O && timeout 200 python $OLDPWD/scripts/peers_small.py) >$L/al_triton_$k.log 2>&1; echo "peers_small rc $?"
            cp -f $O/peers_small.json $L/al_triton_$k.json 2>/dev/null
            a="$a $L/al_fuse_$k.json"; p="$p $L/al_pool_$k.json"; t="$t $L/al_triton_$k.json"
        done
        grep -h "^placement" $L/al_fuse_1.log $L/al_pool_1.log | head -12
        python3 scripts/short_anchors.py --fuse $a --pool $p --triton $t | tee $L/align_rounds.txt ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        # and Triton's short anchors by the bench's 5-run rule (peers_small.py)
        T=500 bench fuse_anchors .gpu/bench-anchors
        triton_anchors
        (cd $O && PYTHONUNBUFFERED=1 timeout 200 python $OLDPWD/scripts/peers_small.py) >$L/peers_small.log 2>&1; echo "peers_small rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    short_rounds) short_rounds 2 ;; # the short anchors over 2 alternated fuse and Triton processes
    add_rounds) # the residual add + activation rows, fuse's and torch.compile's (peers_v2.py add), 2 alternated rounds
        f="" t=""
        for k in 1 2; do
            T=150 bench add_fuse_$k .gpu/bench-anchors FUSE_BENCH_ONLY=add_ >/dev/null
            (cd $O && timeout 200 python $OLDPWD/scripts/peers_v2.py add) >$L/add_peers_$k.log 2>&1; echo "peers_v2 add rc $?"
            cp -f $O/peers_v2.json $L/add_peers_$k.json 2>/dev/null
            f="$f $L/add_fuse_$k.json"; t="$t $L/add_peers_$k.json"
        done
        python3 scripts/short_anchors.py --every-row --peer-impl torch.compile --fuse $f --triton $t | tee $L/add_rounds.txt ;;
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    esac
    tar czf $O/logs.tgz -C $O logs
done
rm -rf $L
exit $status
