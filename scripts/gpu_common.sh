# Sourced by the device scripts (gpu_interop.sh, gpu_tiles2d.sh, gpu_sessionN.sh): CUDA on the paths, a log folder
# under $OUT, `run NAME CMD..` which logs CMD to $L/NAME.log, prints its summary lines and
# sets status=1 when it fails, `py NAME LIMIT SCRIPT ARGS..` for a Python script and `bench NAME BINARY ENV..` for one
# bench run (both also set status=1 when they fail).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
L=${OUT:-/tmp}/logs
mkdir -p "$L"
status=0
run() { # name, command...
    local name=$1; shift
    echo "=== $name: $*"
    if "$@" >"$L/$name.log" 2>&1; then echo "    ok"; else echo "    FAILED (rc $?)"; status=1; fi
    grep -E "^test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$L/$name.log" | head -20
}
py() { # name, time limit (s), script (repository path), arguments...: the script run in $O, its output in $L/name.log;
    # a failure sets status=1
    local name=$1 limit=$2 script=$3; shift 3
    (cd $O && PYTHONUNBUFFERED=1 timeout $limit python $OLDPWD/$script "$@") >$L/$name.log 2>&1
    local rc=$?; echo "$name rc $rc"; [ $rc = 0 ] || status=1
}
bench() { # name, binary, env...: one bench run (limit $T s, default 240), its table kept in $L/name.log, JSON in $L/name.json
    local name=$1 bin=$2; shift 2
    env "$@" FUSE_BENCH_JSON=$L/$name.json timeout ${T:-240} $bin >$L/$name.log 2>&1
    local rc=$?; echo "$name rc $rc"; [ $rc = 0 ] || status=1
}
session_start() { # the session scripts' preamble: the cubin cache, $O, and which GPU and when
    export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache}
    O=${OUT:-/tmp}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
}
peers() { # triton_dot.py (Triton's matmul + epilogue and FlashAttention forward, cuBLAS), and torch_peers.py when TORCH_PEERS is set; JSON into $L
    py triton_dot ${T:-300} .gpu/triton_dot.py
    [ -n "${TORCH_PEERS:-}" ] && py torch_peers ${T:-300} .gpu/torch_peers.py
    cp -f $O/*.json $L/ 2>/dev/null
}
sanitize_dot() { # gpu_dot's test $1 under memcheck, racecheck and synccheck
    for tool in memcheck racecheck synccheck; do
        run ${tool}_dot timeout ${T:-150} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/test-gpu_dot $1 --test-threads=1
    done
}
rows_bench() { # issue 14's rows alone, beside the same-bytes copy (bench-anchors, $L/rows.log)
    T=300 bench rows .gpu/bench-anchors FUSE_BENCH_ONLY=65536x128,16384x256,cross_entropy,qk_norm,add_ FUSE_BENCH_WITH_COPY=1
    grep -E "fuse|copy" $L/rows.log | head -70
}
peers_rows() { # Triton, torch eager and torch.compile on issue 14's rows (scripts/peers_v2.py; $PEERS selects patterns)
    rm -f $O/peers_v2.json
    py peers_v2 ${T:-400} scripts/peers_v2.py ${PEERS:-}
    cp -f $O/*.json $L/ 2>/dev/null; grep -E "^(ok|best|FAILED)" $L/peers_v2.log | tail -60
}
triton_anchors() { # triton_anchor.py (Triton, torch eager and torch.compile on the anchors): $L/triton_anchor.log, JSON in $O
    py triton_anchor ${T:-400} .gpu/triton_anchor.py
}
short_rounds() { # $1 rounds of fuse's short anchors (bench-anchors) and Triton's (peers_small.py), one process each, alternated; then scripts/short_anchors.py over them
    local only=add_mul/1048576,softmax/1024x512,layernorm/4096x1024 k fuse_json="" triton_json=""
    for k in $(seq 1 ${1:-3}); do
        T=150 bench short_fuse_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only >/dev/null
        rm -f $O/peers_small.json
        py short_triton_$k 200 scripts/peers_small.py
        cp -f $O/peers_small.json $L/short_triton_$k.json 2>/dev/null
        fuse_json="$fuse_json $L/short_fuse_$k.json"; triton_json="$triton_json $L/short_triton_$k.json"
    done
    python3 scripts/short_anchors.py --fuse $fuse_json --triton $triton_json | tee $L/short_anchors.txt
}
peer_rounds() { # name, rounds, the bench's FUSE_BENCH_ONLY, peers_v2.py's patterns...: fuse's rows and torch.compile's
    # in alternated processes ($L/<name>_fuse_N, <name>_peers_N), then scripts/short_anchors.py over them
    local name=$1 n=$2 only=$3 k f="" t=""; shift 3
    for k in $(seq 1 $n); do
        T=150 bench ${name}_fuse_$k .gpu/bench-anchors FUSE_BENCH_ONLY=$only >/dev/null
        rm -f $O/peers_v2.json  # a failed run must not pass an earlier run's JSON on as its own
        py ${name}_peers_$k 300 scripts/peers_v2.py "$@"
        cp -f $O/peers_v2.json $L/${name}_peers_$k.json 2>/dev/null
        f="$f $L/${name}_fuse_$k.json"; t="$t $L/${name}_peers_$k.json"
    done
    python3 scripts/short_anchors.py --every-row --peer-impl torch.compile --fuse $f --triton $t | tee $L/${name}_rounds.txt
}
ab_rounds() { # FUSE_BENCH_ONLY, then variants "NAME BINARY [VAR=value ...]": the bench over those cases
    # for each variant (its binary, its environment) in 2 alternated rounds, one process each ($L/ab_<NAME>_<round>);
    # prints each run's fuse lines
    local only=$1 round v; shift
    for round in 1 2; do
        for v in "$@"; do
            local -a w; read -r -a w <<<"$v"
            T=150 bench ab_${w[0]}_$round ${w[1]} FUSE_BENCH_ONLY=$only "${w[@]:2}" >/dev/null
            grep -E " fuse " $L/ab_${w[0]}_$round.log | sed "s/^/$round ${w[0]}: /"
        done
    done
}
add_rounds() { peer_rounds add ${1:-2} add_gelu,add_silu add; } # the residual add + activation rows against torch.compile
verify_all() { # every GPU test: the runtime's and the examples'
    run gpu_runtime timeout ${T:-200} .gpu/test-gpu --test-threads=4
    run gpu_examples timeout ${T:-300} .gpu/test-gpu_examples --test-threads=4
}
anchors_all() { # the bench (every anchor shape and issue 14's rows, with the same-bytes copy), triton_anchor.py, then
    # Triton's short anchors by the bench's 5-run rule (peers_small.py); JSON into $L
    T=500 bench fuse_anchors .gpu/bench-anchors
    triton_anchors
    py peers_small 200 scripts/peers_small.py
    grep -E "runs|Error|assert" $L/peers_small.log | head
    cp -f $O/*.json $L/ 2>/dev/null
}
cubin_cases() { # log prefix, cases (pattern/shape/dtype): one bench process a case, each with its own cubin cache $O/cubins/<pattern>_<shape>_<dtype>
    local prefix=$1 c p s d; shift
    for c in "$@"; do
        IFS=/ read p s d <<<"$c"
        FUSE_CACHE_DIR=$O/cubins/${p}_${s}_$d T=100 bench ${prefix}_${p}_${s}_$d .gpu/bench-anchors FUSE_BENCH_ONLY=$c >/dev/null
        grep -E " fuse " $L/${prefix}_${p}_${s}_$d.log | head -1 | sed "s/^/$prefix: /"
    done
}
same_rows() { # issue 14's narrow rows: fuse's cubins (one bench process each) against torch.compile in
    # Triton's harness (scripts/same_harness.py), in two processes (torch.compile's runs may settle
    # on another level in each: docs/PERF.md "Session 21")
    cubin_cases rows_rust softmax/65536x128/float32 softmax/65536x128/float16 layernorm/65536x128/float32 \
        layernorm/65536x128/float16 softmax/16384x256/float32 softmax/16384x256/float16 layernorm/16384x256/float32 layernorm/16384x256/float16
    local k
    for k in 1 2; do
        rm -f $O/same_harness_rows.json
        py same_rows_$k 300 scripts/same_harness.py $O/cubins rows
        cp -f $O/same_harness_rows.json $L/same_rows_$k.json 2>/dev/null; grep -E "speed|Error|assert" $L/same_rows_$k.log | head -20
    done
}
common_mode() { # the modes the session scripts share (a session script's `*)` case); 1 for any other
    case $1 in
    verify) verify_all ;; # every GPU test (every result read back through Buffer::to_vec)
    anchors) anchors_all ;; # the bench (every anchor and issue 14's rows), triton_anchor.py, peers_small.py
    peers_all) peers_rows ;; # every issue-14 row's peers (peers_v2.py)
    short_rounds) short_rounds 3 ;; # the short anchors over 3 alternated fuse and Triton processes
    add_rounds) add_rounds 2 ;; # the add rows against torch.compile, 2 alternated rounds
    rows_rounds) peer_rounds rows 2 65536x128,16384x256 softmax layernorm ;; # the narrow rows against torch.compile, 2 alternated rounds
    same_rows) same_rows ;; # the narrow rows against torch.compile in Triton's harness
    *) return 1 ;;
    esac
    return 0 # a known mode, whatever its last command returned (failures set status)
}
pack_logs() { # $L as $OUT/logs.tgz (after each mode, so a later mode's timeout keeps the earlier logs)
    tar czf $O/logs.tgz -C $O logs
}
session_end() { # the logs only in the archive; the script's status
    rm -rf $L
    exit $status
}
