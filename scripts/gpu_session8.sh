#!/usr/bin/env bash
# Session 8 on the device (binaries staged by scripts/stage.sh into .gpu/): the per-lane
# cross-entropy, the narrow rows against torch.compile (with Inductor's kernels dumped), and
# ncu profiles of the tensor-core kernels still short of their targets.
# Usage: bash scripts/gpu_session8.sh MODE ...   (modes below; logs and JSON under $OUT)
source scripts/gpu_common.sh
session_start
profile() { # name, kernel regex, binary, env...: one ncu profile of the 4th matching launch
    local name=$1 kern=$2 bin=$3; shift 3
    env "$@" timeout ${T:-200} ncu --clock-control none --kernel-name "regex:$kern" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis $bin >$L/$name.log 2>&1
    echo "$name rc $?"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput" $L/$name.log | head -24
}
for mode in "$@"; do
    case $mode in
    check_ce) # the per-lane cross-entropy (and the other example kernels) against float64 on the GPU
        run gpu_examples timeout 240 .gpu/test-gpu_examples --test-threads=4 ;;
    rows) # issue 14's narrow rows and cross-entropy, each beside the copy of its bytes
        T=300 bench rows .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128,16384x256,cross_entropy FUSE_BENCH_WITH_COPY=1
        grep -E "fuse" $L/rows.log ;;
    peers) # Triton, torch eager and torch.compile for the same rows, Inductor's generated code logged
        (cd $O && PYTHONUNBUFFERED=1 TORCH_LOGS=output_code timeout ${T:-400} python $OLDPWD/scripts/peers_v2.py ${PEERS:-softmax ln ce}) >$L/peers_v2.log 2>&1; echo "peers_v2 rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; grep -E "^(ok|best|FAILED)|torch.compile" $L/peers_v2.log | tail -60 ;;
    ncu) # where the tensor-core kernels spend their cycles: int8 and f16 at 4096^3, attention d64
        profile ncu_int8_4096 matmul_int8 .gpu/bench-matmul FUSE_BENCH_ONLY=matmul_int8/4096x4096x4096 FUSE_BENCH_CONFIGS=5
        profile ncu_f16_4096 matmul .gpu/bench-matmul FUSE_BENCH_ONLY=matmul/4096x4096x4096/float16 FUSE_BENCH_CONFIGS=13
        profile ncu_att_d64_64 attention .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd/b4h32n4096d64/float16 FUSE_BENCH_CONFIGS=3
        profile ncu_att_d64_128 attention .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd/b4h32n4096d64/float16 FUSE_BENCH_CONFIGS=2
        profile ncu_att_d128 attention .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd/b4h32n4096d128/float16 FUSE_BENCH_CONFIGS=6 ;;
    att) # attention after the uniform-branch specialisation: tests (dropout and not), bench, peers
        run gpu_attention timeout 300 .gpu/test-gpu_attention --test-threads=2
        T=300 bench att .gpu/bench-matmul FUSE_BENCH_ONLY=attention_fwd FUSE_BENCH_CONFIGS=${ATT_CONFIGS:-0,3,6}
        grep -E "fuse  " $L/att.log
        # Registers and spills of every cubin this call compiled (the bench's have FUSE_IFF_0 = 1).
        for f in $(find $FUSE_CACHE_DIR -type f -size +1k); do echo "$f $(cuobjdump --dump-resource-usage $f | grep -o 'Function [a-z_0-9]*\|REG:[0-9]* STACK:[0-9]*' | tr '\n' ' ')"; done >$L/cubins.log 2>&1
        grep -c STACK $L/cubins.log; grep -v "STACK:0 " $L/cubins.log | head ;;
    peers_att) # triton_dot.py (Triton's FlashAttention forward, matmul, cuBLAS) and torch_peers.py (SDPA)
        (cd $O && timeout ${T:-300} python $OLDPWD/.gpu/triton_dot.py) >$L/triton_dot.log 2>&1; echo "triton_dot rc $?"
        (cd $O && timeout ${T:-300} python $OLDPWD/.gpu/torch_peers.py) >$L/torch_peers.log 2>&1; echo "torch_peers rc $?"
        cp -f $O/*.json $L/ 2>/dev/null; grep -iE "attention|sdpa|flash|cudnn" $L/triton_dot.log $L/torch_peers.log | head -40 ;;
    ptxas) # registers and spills of the attention kernels as ptxas (CUDA 13.0, sm_90a) reports them:
        # SRC is `attention::f16::SPEC.full_source_staged(..)` for the 64x64 / d128 / 4 warps / 2 stages
        # launch; other configurations change the first five defines only.
        SRC=docs/runs/2026-11-25-h100-session8/call3/att_64x64_d128_4w_2s.cu.gz
        for v in "64 64 128 4 2" "128 64 128 8 3" "128 64 128 8 2" "64 64 64 4 2"; do
            set -- $v
            for drop in 0 1; do
                zcat $SRC | sed -e "1,5d" -e "s/^#define FUSE_IFT_0 .*/#define FUSE_IFT_0 $drop/" -e "s/^#define FUSE_IFF_0 .*/#define FUSE_IFF_0 $((1 - drop))/" >/tmp/body.cu
                printf "#define BM $1\n#define BN $2\n#define D $3\n#define FUSE_NUM_WARPS $4\n#define FUSE_NUM_STAGES $5\n" | cat - /tmp/body.cu >/tmp/att.cu
                echo "== ${1}x$2 d$3 $4 warps $5 stages, dropout block compiled in: $drop"
                nvcc -cubin -gencode arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/att.cubin /tmp/att.cu 2>&1 | grep -E "registers|spill|error"
            done
        done 2>&1 | tee $L/ptxas.log ;;
    sanitize) # the p_drop = 0 and dropout variants (the new branch facts) under memcheck and racecheck
        for tool in memcheck racecheck; do
            run ${tool}_attention timeout 280 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_attention attention_default_config --test-threads=1
        done ;;
    esac
    tar czf $O/logs.tgz -C $O logs # after each mode, so a call cut by its time limit keeps what ran
done
