#!/usr/bin/env bash
# Session 7 on the device (binaries staged by scripts/stage.sh into .gpu/): tuning sweeps for the
# rows still short of issues 14, 15 and 17, then the checks and peers of the final runs.
# Usage: bash scripts/gpu_session7.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    tune_ew) # element-wise f16 rows: block x warps (copy once, at the runtime's default warps)
        bench ew_copy .gpu/bench-anchors FUSE_BENCH_ONLY=bias_gelu_dropout/8192x4096/float16,add_silu/8192x4096/float16 FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/ew_copy.log
        for eb in 1024 2048 4096; do for w in 2 4 8; do
            bench ew_b${eb}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=bias_gelu_dropout/8192x4096/float16,add_silu/8192x4096/float16 FUSE_BENCH_EW_BLOCK=$eb FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/ew_b${eb}_w$w.log | sed "s/^/b$eb w$w  /"
        done; done ;;
    tune_rows) # narrow softmax rows per program x warps; cross-entropy warps; GPT-J heads x warps
        bench rows_default .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,cross_entropy/4096x50257/bfloat16,qk_norm_rope_gptj FUSE_BENCH_ROWS_SWEEP=1 FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/rows_default.log
        for w in 2 4 8 16; do
            bench rows_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,cross_entropy/4096x50257/bfloat16 FUSE_BENCH_ROWS_SWEEP=1 FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/rows_w$w.log | sed "s/^/w$w  /"
        done
        for h in 4 16; do for w in 1 2 4; do
            bench qk_h${h}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=qk_norm_rope_gptj FUSE_BENCH_QK_HEADS=$h FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/qk_h${h}_w$w.log | sed "s/^/h$h w$w  /"
        done; done ;;
    check17) # bias+GELU+dropout (both forms) and the residual add + activation rows, with their copies
        bench c17 .gpu/bench-anchors FUSE_BENCH_ONLY=bias_gelu_dropout,add_silu,add_gelu FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/c17.log ;;
    tune_rows2) # narrow softmax rows per program, cross-entropy bf16 50257 at 8/16 warps
        bench rows_default .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,cross_entropy/4096x50257/bfloat16 FUSE_BENCH_ROWS_SWEEP=1 FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/rows_default.log
        for w in 4 8 16; do
            bench rows_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,cross_entropy/4096x50257/bfloat16 FUSE_BENCH_ROWS_SWEEP=1 FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/rows_w$w.log | sed "s/^/w$w  /"
        done ;;
    check) # correctness after the session's changes: the example kernels, TF32 dots, wgmma regressions
        run gpu_examples timeout 240 .gpu/test-gpu_examples --test-threads=4
        run gpu_dot_tf32 timeout 200 .gpu/test-gpu_dot tf32
        run gpu_dot_wg timeout 150 .gpu/test-gpu_dot warpgroup_blocks
        run gpu_dot_pipe timeout 150 .gpu/test-gpu_dot pipelined_k_loops ;;
    sanitize) # compute-sanitizer over the TF32 tests and the FFN example (issue 15)
        for tool in memcheck racecheck; do
            run ${tool}_tf32 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot tf32_blocks --test-threads=1
        done
        run memcheck_ffn timeout 280 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_dot ffn_sublayer_example --test-threads=1 ;;
    rows) # issue 14's new rows and issue 17's dropout rows, each beside the copy of its bytes
        T=300 bench rows .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128,16384x256,qk_norm_rope,cross_entropy,add_gelu,add_silu,bias_gelu_dropout FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/rows.log ;;
    peers) # Triton, torch eager and torch.compile for issue 14's rows (scripts/peers_v2.py)
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/scripts/peers_v2.py) >$L/peers_v2.log 2>&1; echo "peers_v2 rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; tail -50 $L/peers_v2.log ;;
    bench) # the whole anchor bench (fuse, unfused chains, copies)
        T=400 bench anchors .gpu/bench-anchors; tail -80 $L/anchors.log ;;
    anchors) # triton_anchor.py: Triton on the 24 memory-bound anchor shapes
        (cd $O && timeout ${T:-300} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; tail -40 $L/triton_anchor.log ;;
    tune_ce) # cross-entropy column block x warps; LayerNorm rows warps
        for cb in 4096 8192 16384; do for w in 8 16 32; do
            bench ce_b${cb}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=cross_entropy FUSE_BENCH_CE_BLOCK=$cb FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/ce_b${cb}_w$w.log | sed "s/^/b$cb w$w  /"
        done; done
        for w in 2 4 8 16; do
            bench ln_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=layernorm/65536x128,layernorm/16384x256 FUSE_BENCH_WARPS=$w
            grep -E "fuse" $L/ln_w$w.log | sed "s/^/w$w  /"
        done ;;
    check2) # the f32 forms that now run on TF32 tensor cores, and the examples after the formatting
        run gpu_dot_forms timeout 250 .gpu/test-gpu_dot matmul_f16_bf16_f32
        run gpu_dot_acc timeout 150 .gpu/test-gpu_dot accumulator_method_form
        run gpu_dot_tf32b timeout 150 .gpu/test-gpu_dot tf32_blocks
        run gpu_dot_red timeout 150 .gpu/test-gpu_dot reductions_of_a_dot_result
        run gpu_examples timeout 200 .gpu/test-gpu_examples --test-threads=4 ;;
    sanitize2) # racecheck of the FFN example, synccheck of the wgmma blocks
        run racecheck_ffn timeout 280 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_dot ffn_sublayer_example --test-threads=1
        run synccheck_wg timeout 250 compute-sanitizer --tool synccheck --error-exitcode 9 .gpu/test-gpu_dot warpgroup_blocks --test-threads=1 ;;
    ce) # cross-entropy with the next block's load ahead of the fold, beside the copies
        bench ce .gpu/bench-anchors FUSE_BENCH_ONLY=cross_entropy FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/ce.log ;;
    sanitize3) # the example kernels (ChunkHalf loads, aligned cross-entropy rows) under memcheck and racecheck
        run memcheck_examples timeout 280 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/test-gpu_examples --test-threads=1
        run racecheck_examples timeout 280 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/test-gpu_examples --test-threads=1 ;;
    sanitize4) # the TF32 K-major B and reductions tests under memcheck and racecheck
        for tool in memcheck racecheck; do
            run ${tool}_tf32_more timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot tf32_k_major --test-threads=1
            run ${tool}_tf32_red timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot tf32_reductions --test-threads=1
        done ;;
    tune_int8) # int8 and f16 at 4096^3, the candidate configurations
        T=400 bench int8_4096 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul_int8/4096x4096x4096 FUSE_BENCH_CONFIGS=${INT8_CONFIGS:-5,6,7,8,9}
        grep -E "fuse" $L/int8_4096.log
        bench f16_4096 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul/4096x4096x4096/float16 FUSE_BENCH_CONFIGS=13
        grep -E "fuse" $L/f16_4096.log ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
