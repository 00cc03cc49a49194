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
    sanitize_rope) # memcheck on the RoPE kernels (GPT-J's weights read in the tile's layout, session 18)
        run memcheck_qk_norm_rope timeout ${T:-240} compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples qk_norm_rope_on_gpu --test-threads=1 ;;
    harness) # hand-edited LayerNorm f32 16384x256 kernels (scripts/experiments/slab/gen18) beside torch.compile's cubin:
        # per call after a memset, a kernel flush, and a memset then the same kernel on other rows (code warm, data cold)
        INDUCTOR_DIR=scripts/experiments/slab/gen18/ind run h18 bash scripts/experiments/slab/run.sh scripts/experiments/slab/gen18 256
        grep -E "^(inductor|check|percall|time)" $L/h18.log ;;
    rows) # the rows in question beside the same-bytes copy, twice
        for r in 1 2; do
            T=200 bench rows_$r .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128/float32,16384x256/float32,add_silu,add_gelu FUSE_BENCH_WITH_COPY=1 >/dev/null
            grep -E " fuse |copy" $L/rows_$r.log | sed "s/^/round $r: /"
        done ;;
    add_sweep) # the add + activation rows at other blocks and warps
        for blk in 1024 2048 4096; do for w in 2 4 8; do
            T=100 bench add_${blk}_$w .gpu/bench-anchors FUSE_BENCH_ONLY=add_silu,add_gelu FUSE_BENCH_EW_BLOCK=$blk FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/add_${blk}_$w.log | grep -v unfused | sed "s/^/block $blk warps $w: /"
        done; done ;;
    gptj_ab) # GPT-J RoPE with its weights read as whole rows and split (new) against the stride-2 reads
        # (bench-anchors-old), 3 alternating rounds; then the new kernel at other warps and heads per program
        for round in 1 2 3; do for v in old new; do
            bin=.gpu/bench-anchors; [ $v = old ] && bin=.gpu/bench-anchors-old
            T=120 bench gptj_${v}_$round $bin FUSE_BENCH_ONLY=qk_norm_rope >/dev/null
            grep -E " fuse " $L/gptj_${v}_$round.log | grep -v unfused | sed "s/^/round $round $v: /"
        done; done
        for w in 2 4 8; do for h in 4 8 16; do
            T=100 bench gptj_w${w}_h$h .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope_gptj FUSE_BENCH_WARPS=$w FUSE_BENCH_QK_HEADS=$h >/dev/null
            grep -E " fuse " $L/gptj_w${w}_h$h.log | grep -v unfused | sed "s/^/warps $w heads $h: /"
        done; done ;;
    rows_anchor) # LayerNorm 4096x1024 and softmax 1024x512 by the several-rows kernels ("fuse") beside the
        # one-row kernels, at the default warps and at 2 (a row per warp for LayerNorm's [2, 1024]); then
        # triton_anchor.py (a build of the bench with those cases added, not committed)
        for w in def 2; do
            envw=""; [ $w = def ] || envw="FUSE_BENCH_WARPS=$w"
            for r in 1 2; do
                T=100 bench ra_${w}_$r .gpu/bench-anchors FUSE_BENCH_ONLY=layernorm/4096x1024,softmax/1024x512 $envw >/dev/null
                grep -E " fuse " $L/ra_${w}_$r.log | grep -v unfused | sed "s/^/warps $w round $r: /"
            done
        done
        triton_anchors
        grep -E "(layernorm +4096x1024|softmax +1024x512).*triton " $L/triton_anchor.log ;;
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    peers) PEERS="${PEERS:-layernorm softmax add}" peers_rows ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors
        triton_anchors
        cp -f $O/*.json $L/ 2>/dev/null ;;
    esac
    pack_logs
done
session_end
