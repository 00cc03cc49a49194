#!/usr/bin/env bash
# Session 19 on the device (tests and bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session19.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
clocks() { # SM and memory clocks every 100 ms into $L/clocks_$1.log while the rest of the mode runs
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 100 >$L/clocks_$1.log 2>&1 &
    CLOCKS_PID=$!
}
for mode in "$@"; do
    case $mode in
    info) # the peer's timing method as installed, for the bench's copy of it (Device::do_bench_ms)
        python -c "import inspect, triton, triton.testing as t; print(triton.__version__); print(inspect.getsource(t.do_bench))" >$L/do_bench_source.log 2>&1
        head -3 $L/do_bench_source.log ;;
    verify) run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    sanitize_new) # memcheck on the GPU tests that never ran under it: NaN/inf constants, exact-ulp sigmoid
        for t in float_constants_match_cpu sigmoid_is_within; do
            run memcheck_$t timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
    method_ab) # the small anchors timed the old way (one warm-up call, median of 100) and do_bench's way, twice, with clocks
        clocks method_ab
        for r in 1 2; do for m in fixed dobench; do
            envm=""; [ $m = fixed ] && envm="FUSE_BENCH_FIXED_REPS=100"
            T=120 bench ab_${m}_$r .gpu/bench-anchors FUSE_BENCH_ONLY=add_mul/1048576,softmax/1024x512,layernorm/4096x1024 $envm >/dev/null
            grep -E " fuse " $L/ab_${m}_$r.log | grep -v unfused | sed "s/^/round $r $m: /"
        done; done
        kill $CLOCKS_PID ;;
    samples) # every per-call time of the small anchors under three schedules, fuse's then Triton's, twice
        for r in 1 2; do
            T=120 bench samples_$r .gpu/bench-anchors FUSE_BENCH_SAMPLES=1 FUSE_BENCH_ONLY=add_mul/1048576,softmax/1024x512 >/dev/null
            grep "^samples" $L/samples_$r.log | sed "s/^/round $r: /"
            (cd $O && timeout 200 python $OLDPWD/scripts/peers_small.py samples) >$L/samples_peer_$r.log 2>&1; echo "samples_peer rc $?"
            grep "^samples" $L/samples_peer_$r.log | sed "s/^/round $r: /"
        done ;;
    small_sweep) # the short anchors (least of 5 do_bench runs) at other warps and element-wise blocks, then Triton's
        T=100 bench sw_default .gpu/bench-anchors FUSE_BENCH_ONLY=add_mul/1048576,softmax/1024x512,layernorm/4096x1024 >/dev/null
        grep -E " fuse " $L/sw_default.log | grep -v unfused | sed "s/^/default: /"
        for w in 1 2 4 8; do
            T=100 bench sw_rows_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/1024x512,layernorm/4096x1024 FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/sw_rows_w$w.log | grep -v unfused | sed "s/^/warps $w: /"
        done
        for blk in 512 1024 2048; do for w in 1 2 4 8; do
            T=100 bench sw_am_${blk}_$w .gpu/bench-anchors FUSE_BENCH_ONLY=add_mul/1048576 FUSE_BENCH_EW_BLOCK=$blk FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/sw_am_${blk}_$w.log | grep -v unfused | sed "s/^/block $blk warps $w: /"
        done; done
        (cd $O && PYTHONUNBUFFERED=1 timeout 200 python $OLDPWD/scripts/peers_small.py) >$L/peers_small.log 2>&1; echo "peers_small rc $?"
        grep -E "runs|Error|assert" $L/peers_small.log | head ;;
    placement) # the short anchors in four bench processes and two Triton ones, with where each buffer starts in its 2 MiB page
        for r in 1 2 3 4; do
            T=100 bench pl_$r .gpu/bench-anchors FUSE_BENCH_PTRS=1 FUSE_BENCH_ONLY=add_mul/1048576,softmax/1024x512,layernorm/4096x1024 >/dev/null
            grep -E "^placement| fuse " $L/pl_$r.log | grep -v unfused | sed "s/^/fuse $r: /"
        done
        for r in 1 2; do
            (cd $O && timeout 100 python $OLDPWD/scripts/peers_small.py placement) >$L/pl_triton_$r.log 2>&1; echo "peers_small rc $?"
            grep -E "^placement|runs" $L/pl_triton_$r.log | sed "s/^/triton $r: /"
        done ;;
    align) # add_mul 1M and softmax 1024x512 with their buffers where the pool put them and at 2 MiB boundaries, alternated, one process
        # (session 19's bench, 3ca3bea: FUSE_BENCH_ALIGN left the bench when fuse-runtime began aligning large buffers;
        # a later bench would ignore it and time nothing new, so the mode refuses one without the probe)
        grep -q FUSE_BENCH_ALIGN .gpu/bench-anchors || { echo "align: this bench has no FUSE_BENCH_ALIGN probe (built before 929e6af)"; status=1; continue; }
        T=150 bench align .gpu/bench-anchors FUSE_BENCH_ALIGN=1 FUSE_BENCH_ONLY=add_mul/1048576,softmax/1024x512 >/dev/null
        grep -E " fuse" $L/align.log | grep -v unfused ;;
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors,
        # then Triton's short anchors by the bench's 5-run rule (peers_small.py)
        clocks anchors
        anchors_all
        kill $CLOCKS_PID ;;
    esac
    pack_logs
done
session_end
