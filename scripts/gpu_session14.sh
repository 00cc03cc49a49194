#!/usr/bin/env bash
# Sessions 13-14 on the device (binaries staged by scripts/stage.sh into .gpu/): the whole check of
# issues 14, 15, 16 and 18 on the code with tensor-core results stored through shared memory
# (session 12), every figure beside its peers in the same call. Written in session 13 (no device),
# run in session 14 (calls 1-5 as planned below, anchors and peers_rows in separate calls).
# Usage: bash scripts/gpu_session14.sh MODE ...   (modes below; logs and JSON under $OUT)
# Staging here: bash scripts/stage.sh -p fuse --test gpu_dot --test gpu_examples --test gpu_attention
#   --bench matmul --bench anchors; cp ../shared/anchors/*.py .gpu/   (carry [".gpu"])
# Calls planned (each under 600 s; NVRTC compiles are 0.4-4 s a variant since session 13):
#   1. THREADS=8 bash scripts/gpu_session14.sh dot attention examples
#   2. bash scripts/gpu_session14.sh mm i8 att peers            (issues 15, 16, 18: one same-call table)
#   3. bash scripts/gpu_session14.sh sanitize                    (every dot example, CFG=4 for int8/FFN)
#   4. bash scripts/gpu_session14.sh anchors peers_rows          (issue 14, and the 24 anchor shapes)
# Left for the next session (stage gpu_examples and anchors): `examples rows peers_rows` (the GPT-J
# split/join row `fuse split` beside the partner-load one and Triton's, one call) and `warps_ab`
# (the axis-reduction warps rule against the old 8 warps).
source scripts/gpu_common.sh
session_start
for mode in "$@"; do
    case $mode in
    dot) # every tensor-core test; the int8 and FFN examples at the configurations in $CFG (all if unset)
        run gpu_dot timeout ${T:-420} env ${CFG:+FUSE_TEST_CONFIGS=$CFG} .gpu/test-gpu_dot --test-threads=${THREADS:-4} ;;
    examples)
        run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4 ;;
    attention)
        run gpu_attention timeout ${T:-300} .gpu/test-gpu_attention --test-threads=2 ;;
    mm) # the matmul table: f16/bf16, plain and bias+GELU, at the wgmma configurations
        T=400 bench mm .gpu/bench-matmul FUSE_BENCH_ONLY=matmul/,matmul_bias_gelu/ FUSE_BENCH_CONFIGS=${MM_CONFIGS:-11,13,14}
        grep -E "fuse  " $L/mm.log ;;
    i8) # int8 at its best configurations
        T=300 bench i8 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul_int8 FUSE_BENCH_CONFIGS=${I8_CONFIGS:-0,4}
        grep -E "fuse  " $L/i8.log ;;
    att) # attention at the bench's configurations
        T=300 bench att .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,2,3,6}
        grep -E "fuse  " $L/att.log ;;
    peers) # triton_dot.py and torch_peers.py
        TORCH_PEERS=1 peers; grep -E "attention|matmul" $L/triton_dot.log | head -40 ;;
    sanitize) # memcheck and racecheck on every dot example (the int8 and FFN ones at $CFG)
        for t in matmul_example matmul_int8_example ffn_sublayer_example; do
            for tool in memcheck racecheck; do
                run ${tool}_$t timeout ${T:-300} env FUSE_TEST_CONFIGS=${CFG:-4} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot $t --exact --test-threads=1
            done
        done
        for tool in memcheck racecheck synccheck; do
            run ${tool}_att timeout ${T:-300} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        done ;;
    anchors) # every anchor shape and issue 14's rows (with the same-bytes copy), then Triton's anchors
        T=500 bench fuse_anchors .gpu/bench-anchors # not anchors.json: triton_anchor.py writes that
        grep -E "fuse|copy" $L/fuse_anchors.log | head -80
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    rows) rows_bench ;;
    peers_rows) peers_rows ;;
    lnsweep) # the narrow-row LayerNorm and softmax at every rows tile x warps (FUSE_ROWS_TILE, FUSE_BENCH_WARPS)
        for tile in 1024 2048 4096 8192; do for w in 1 2 4 8; do
            T=60 bench sweep_t${tile}_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=${SWEEP_ONLY:-layernorm/65536x128,layernorm/16384x256,softmax/65536x128,softmax/16384x256} FUSE_ROWS_TILE=$tile FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/sweep_t${tile}_w$w.log | grep -v "1 row" | sed "s/^/tile $tile warps $w: /"
        done; done ;;
    # (call 8 also ran an `early` mode: layernorm_rows with its weight and bias loaded before the
    # reductions, the bench diff in docs/runs/2026-11-27-h100-session14/call8/early_loads_attempt.diff)
    smallsweep) # the small anchor shapes below Triton on the H100: warps x block (add_mul), warps (rows)
        for w in 2 4 8; do for blk in 512 1024 2048 4096; do
            T=60 bench small_w${w}_b$blk .gpu/bench-anchors FUSE_BENCH_ONLY=add_mul/1048576/ FUSE_BENCH_WARPS=$w FUSE_BENCH_EW_BLOCK=$blk >/dev/null
            grep -E " fuse " $L/small_w${w}_b$blk.log | sed "s/^/warps $w block $blk: /"
        done; done
        for w in 1 2 4 8 16; do
            T=60 bench rows_w$w .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/1024x512/,layernorm/4096x1024/ FUSE_BENCH_WARPS=$w >/dev/null
            grep -E " fuse " $L/rows_w$w.log | sed "s/^/warps $w: /"
        done ;;
    warps_ab) # the axis-reduction warps rule: the new default (16 elements a thread) against the old 8 warps, 2 rounds
        for round in 1 2; do for w in default 8; do
            T=60 bench ab_${w}_$round .gpu/bench-anchors FUSE_BENCH_ONLY=softmax/65536x128,layernorm/65536x128,softmax/16384x256,layernorm/16384x256 $([ $w = 8 ] && echo FUSE_BENCH_WARPS=8) >/dev/null
            grep -E " fuse " $L/ab_${w}_$round.log | grep -v "1 row" | sed "s/^/round $round warps $w: /"
        done; done ;;
    inductor) # torch.compile's generated Triton for the same rows, and its time beside a copy
        (TORCH_LOGS=output_code timeout ${T:-300} python scripts/inductor_probe.py) >$L/inductor.log 2>&1; echo "inductor rc $?"
        grep PROBE $L/inductor.log ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
