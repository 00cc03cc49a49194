#!/usr/bin/env bash
# Session 20 on the device (tests and bench staged by scripts/stage.sh into .gpu/).
# Staging: rm -rf .gpu && bash scripts/stage.sh -p fuse --test gpu_examples --bench anchors
#          && bash scripts/stage.sh -p fuse-runtime --test gpu; cp ../shared/anchors/*.py .gpu/
# Usage: bash scripts/gpu_session20.sh MODE ...   (modes below; logs and JSON in $OUT/logs.tgz)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    verify) verify_all ;; # every GPU test: the runtime's (page-aligned buffers among them) and the examples'
    sanitize_chunks) # memcheck over the example tests whose loads took commit 24206f6's whole-chunk path
        # (QK's gathers, the out-of-bounds test's chunks past the end; reverted since) and the rows kernels
        for t in gpu_out_of_bounds qk_norm_rope_on_gpu add_mul_on_gpu rows_kernels cross_entropy_on_gpu; do
            run memcheck_$t timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples $t --test-threads=1
        done ;;
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
        anchors_all ;;
    short_rounds) short_rounds 2 ;; # the short anchors over 2 alternated fuse and Triton processes
    add_rounds) add_rounds 2 ;; # the residual add + activation rows, fuse's and torch.compile's, 2 alternated rounds
    triton_sass) # Triton's compiled short-anchor kernels (peers_small.py's, from its cache): PTX and SASS
        (cd $O && TRITON_CACHE_DIR=$O/triton-cache timeout 200 python $OLDPWD/scripts/peers_small.py) >$L/sass_peers.log 2>&1; echo "peers_small rc $?"
        for c in $(find $O/triton-cache -name "*.cubin"); do
            k=$(basename $c .cubin); h=$(basename $(dirname $c))
            cuobjdump -sass $c >$L/triton_${k}_${h:0:8}.sass 2>&1
            cp $(dirname $c)/$k.ptx $L/triton_${k}_${h:0:8}.ptx 2>/dev/null
            cp $(dirname $c)/$k.json $L/triton_${k}_${h:0:8}.json 2>/dev/null
        done
        ls $L | grep triton_ | head -40 ;;
    plain_ab) # loads as plain ld.global against the default ld.global.nc, 3 alternated rounds. Ran with a
        # temporary patch, since reverted (no effect beyond noise: docs/PERF.md "Session 20"): with
        # FUSE_EXP_PLAIN_LOADS=1 the runtime defined FUSE_PLAIN_LOADS and the prelude's
        # fuse_ldg_words loaded through inline-PTX ld.global instead of __ldg
        grep -q FUSE_EXP_PLAIN_LOADS .gpu/bench-anchors || { echo "plain_ab: the bench lacks the patch"; status=1; continue; }
        only=add_mul,softmax/1024x512,softmax/8192x8192,layernorm/4096x1024,layernorm/8192x8192
        a="" p=""
        for k in 1 2 3; do
            T=150 bench nc_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only >/dev/null
            T=150 bench plain_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only FUSE_EXP_PLAIN_LOADS=1 >/dev/null
            a="$a $L/nc_$k.json"; p="$p $L/plain_$k.json"
        done
        python3 scripts/short_anchors.py --every-row --peer-impl fuse --fuse $p --peer $a | tee $L/plain_ab.txt ;;
    qk_ncu) # fuse's NeoX QK-norm + RoPE f16 at 2 and 4 warps and 8 or 16 heads a program, then Nsight
        # Compute sections of fuse's default and Triton's fastest (scripts/qk_probe.py), and Triton's SASS
        for cfg in "2 8" "4 8" "2 16" "4 16"; do
            read w h <<<"$cfg"
            T=100 bench qk_w${w}_h$h .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope_neox/8192x48x128/float16 FUSE_BENCH_WARPS=$w FUSE_BENCH_QK_HEADS=$h >/dev/null
            grep -E " fuse " $L/qk_w${w}_h$h.log | sed "s/^/warps $w heads $h: /"
        done
        SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis"
        run ncu_qk_fuse timeout 200 env FUSE_BENCH_ONLY=qk_norm_rope_neox/8192x48x128/float16 FUSE_BENCH_JSON=/dev/null ncu --clock-control none --kernel-name regex:qk_norm_rope --launch-skip 2 --launch-count 5 --csv $SECTIONS .gpu/bench-anchors
        run ncu_qk_triton timeout 200 env TRITON_CACHE_DIR=$O/qk-triton-cache ncu --clock-control none --kernel-name regex:qk_split_k --launch-skip 2 --launch-count 5 --csv $SECTIONS python scripts/qk_probe.py
        for c in $(find $O/qk-triton-cache -name "qk_split_k.cubin"); do cuobjdump -sass $c >$L/triton_qk_split_k.sass 2>&1; done
        rm -rf $O/qk-triton-cache
        python3 scripts/ncu_summary.py $L/ncu_qk_fuse.log $L/ncu_qk_triton.log >$L/ncu_qk.txt
        grep -E "grid|Duration|Registers|Occupancy" $L/ncu_qk.txt ;;
    minb_ab) # QK-norm + RoPE with __launch_bounds__(threads, B) (a temporary patch, FUSE_EXP_MINB=B:
        # ptxas caps registers for B programs an SM), against the default, 2 alternated rounds
        grep -q FUSE_EXP_MINB .gpu/bench-anchors || { echo "minb_ab: the bench lacks the patch"; status=1; continue; }
        a="" p16="" p24="" p32=""
        for k in 1 2; do
            for b in 0 24 32; do
                envb=""; [ $b != 0 ] && envb="FUSE_EXP_MINB=$b"
                T=100 bench minb${b}_$k .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope $envb >/dev/null
            done
            T=100 bench minb16w4_$k .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope FUSE_EXP_MINB=16 FUSE_BENCH_WARPS=4 >/dev/null
            a="$a $L/minb0_$k.json"; p24="$p24 $L/minb24_$k.json"; p32="$p32 $L/minb32_$k.json"; p16="$p16 $L/minb16w4_$k.json"
        done
        python3 scripts/short_anchors.py --every-row --peer-impl fuse --b24 $p24 --b32 $p32 --b16w4 $p16 --fuse $a --peer $a | tee $L/minb_ab.txt ;;
    len16_ab) # commit 24206f6's whole-chunk checked loads (FUSE_LEN16 facts as computed) against the same
        # binary with them off (EXP_NOLEN16=1, a temporary patch on top), on the rows with unproven
        # loads and the short anchors, 2 alternated rounds; then Triton's QK (peers_v2.py qk).
        # Mixed results: 24206f6 was reverted (docs/PERF.md "Session 20")
        grep -q EXP_NOLEN16 .gpu/bench-anchors || { echo "len16_ab: the bench lacks the patch"; status=1; continue; }
        only=qk_norm_rope,cross_entropy,add_mul/1048576,softmax/1024x512,layernorm/4096x1024
        a="" p=""
        for k in 1 2; do
            T=200 bench len16_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only >/dev/null
            T=200 bench nolen16_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only EXP_NOLEN16=1 >/dev/null
            a="$a $L/len16_$k.json"; p="$p $L/nolen16_$k.json"
        done
        python3 scripts/short_anchors.py --every-row --peer-impl fuse --fuse $a --peer $p | tee $L/len16_ab.txt
        PEERS=qk peers_rows >/dev/null; grep -E "qk_norm.*(triton|torch.compile) " $L/peers_v2.log ;;
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    *) echo "unknown mode $mode"; status=1 ;;
    esac
    pack_logs
done
session_end
