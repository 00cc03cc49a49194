#!/usr/bin/env bash
# Session 13 on the device (binaries staged by scripts/stage.sh into .gpu/): the whole check of
# issues 14, 15, 16 and 18 on the code with tensor-core results stored through shared memory
# (session 12), every figure beside its peers in the same call.
# Usage: bash scripts/gpu_session13.sh MODE ...   (modes below; logs and JSON under $OUT)
# Staging here: bash scripts/stage.sh -p fuse --test gpu_dot --test gpu_examples --test gpu_attention
#   --bench matmul --bench anchors; cp ../shared/anchors/*.py .gpu/   (carry [".gpu"])
# Calls planned (each under 600 s; NVRTC compiles are 0.4-4 s a variant since session 13):
#   1. THREADS=8 bash scripts/gpu_session13.sh dot attention examples
#   2. bash scripts/gpu_session13.sh mm i8 att peers            (issues 15, 16, 18: one same-call table)
#   3. bash scripts/gpu_session13.sh sanitize                    (every dot example, CFG=4 for int8/FFN)
#   4. bash scripts/gpu_session13.sh anchors peers_rows          (issue 14, and the 24 anchor shapes)
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
        T=500 bench anchors .gpu/bench-anchors
        grep -E "fuse|copy" $L/anchors.log | head -80
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/.gpu/triton_anchor.py) >$L/triton_anchor.log 2>&1; echo "triton_anchor rc $?"
        cp -f $O/*.json $L/ 2>/dev/null ;;
    rows) # issue 14's rows alone, beside the same-bytes copy
        T=300 bench rows .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128,16384x256,cross_entropy,qk_norm,add_ FUSE_BENCH_WITH_COPY=1
        grep -E "fuse|copy" $L/rows.log | head -60 ;;
    peers_rows) # Triton, torch eager and torch.compile on issue 14's rows (scripts/peers_v2.py)
        (cd $O && PYTHONUNBUFFERED=1 timeout ${T:-400} python $OLDPWD/scripts/peers_v2.py ${PEERS:-}) >$L/peers_v2.log 2>&1; echo "peers_v2 rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; grep -E "^(ok|best|FAILED)" $L/peers_v2.log | tail -60 ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
exit $status
