#!/usr/bin/env bash
# The device runner: run ON the device machine, from the repository root, over the binaries that
# scripts/device/stage.sh put in .gpu/ (carried as .gpu or .gpu.tar.xz) and the peer scripts in
# scripts/device/peers/. Usage: bash scripts/device/run.sh MODE [ARG...] [MODE [ARG...]] ...
#
#   examples [NAME...]           every .gpu/example-* (or those named): exit 0 and a PASS line
#   gpu-tests [T[:FILTER]...]    the harness = false test binaries with GPU tests (libtest-mimic)
#                                with --include-ignored, so that no GPU test passes by being
#                                ignored (on a machine of one GPU, less the two-GPU test; not
#                                candle_gpu, built here without candle's CUDA: see `candle`; the
#                                CPU-only emitted_cuda, ptxas_resources and emulated_* when named)
#   cpu-tests [T[:FILTER]...]    the built-in-harness test binaries, run plainly (not `ui`: trybuild
#                                runs cargo)
#   memcheck | racecheck | synccheck [T[:FILTER]...]
#                                compute-sanitizer's tool over the GPU test binaries (or those named,
#                                e.g. `memcheck rows:gpu dot:gpu`), one test thread
#   bench NAME...                .gpu/bench-NAME --bench, its JSON rows in bench-NAME.json
#   bench-all                    every .gpu/bench-*
#   peers [NAME[:ARG,...]...]    each peer script (default all): triton_anchor, triton_dot,
#                                torch_peers, train_peers, peers_v2 (the inference rows; arguments are
#                                its pattern prefixes, e.g. peers_v2:softmax,ln) and peers_v2:short
#                                (the short anchors by the 5-run rule); JSON in peer-NAME.json
#   ab BEFORE_DIR AFTER_DIR      the anchor and matmul benches ($AB_BENCHES) of two stages in
#                                alternated processes, $AB_ROUNDS rounds (2), the order flipped each
#                                round; ab.md compares each side's best over its processes
#   join                         the bench and peer JSON so far as one table (join.md)
#   candle                       .gpu2/candle-gpu.tar.xz (scripts/build_candle_gpu.sh): the example
#                                and the GPU tests of fuse-candle's CUDA build
# A mode given twice runs twice (bench anchors peers peers_v2:short bench anchors peers
# peers_v2:short join: two alternated rounds; join keeps each row's least time).
#
# Environment: STAGE (.gpu), LIMIT (seconds a process, 540), TEST_THREADS (4), PYTHON (python3),
# AB_BENCHES ("anchors matmul"), AB_ROUNDS (2), AB_BEFORE_ENV / AB_AFTER_ENV ("VAR=value ..." for
# one side's benches, e.g. the same stage twice under two settings); the benches' own variables
# (FUSE_BENCH_ONLY, ...) pass through. Logs: target/device/logs/ (cleared at the start unless
# KEEP_LOGS=1); where $OUT is set they come back as $OUT/logs.tgz (packed after every step), with
# $OUT/summary.txt and the tables. One summary line a mode; the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
DEV=scripts/device
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export FUSE_CACHE_DIR=${FUSE_CACHE_DIR:-/tmp/fuse-cache} PYTHONUNBUFFERED=1
# insta (emitted_cuda's snapshots) finds tests/snapshots from here, not the build machine's path.
export INSTA_WORKSPACE_ROOT=$PWD
STAGE=${STAGE:-.gpu} LIMIT=${LIMIT:-540} PY=${PYTHON:-python3}
L=target/device/logs
MODES=" examples gpu-tests cpu-tests memcheck racecheck synccheck bench bench-all peers ab join candle "
PEERS=(triton_anchor triton_dot torch_peers train_peers peers_v2 peers_v2:short)

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
is_mode() { [[ $MODES == *" $1 "* ]]; }

# Each step's log is $L/NAME.log (NAME.2.log for a second run); `ok` counts a mode's steps, `bad`
# names its failures.
fresh() { # NAME: NAME, or NAME.2, NAME.3 ... where NAME.log is taken
    local n=$1 k=2
    while [ -e "$L/$n.log" ]; do n=$1.$k; k=$((k + 1)); done
    echo "$n"
}
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")" 2>/dev/null; true; }
verdict() { # NAME PASSED(0/1) DETAIL...: one line, counted for the mode
    local name=$1 good=$2; shift 2
    if [ "$good" = 0 ]; then ok=$((ok + 1)); echo "    ok      $name $*"; else bad+=("$name"); echo "    FAILED  $name $*"; fi
    echo "$([ "$good" = 0 ] && echo ok || echo FAILED) $name $*" >>"$L/steps.txt"
    pack
}
step() { # NAME CMD...: CMD (time limit $LIMIT) logged to $L/NAME.log; sets rc
    local name=$1; shift
    echo "=== $name: $*"
    timeout "$LIMIT" "$@" >"$L/$name.log" 2>&1
    rc=$?
    [ $rc = 124 ] && echo "(killed after $LIMIT s)" >>"$L/$name.log"
}
last() { grep -E "$1" "$L/$2.log" | tail -1; } # PATTERN NAME: the log's last line matching
said_pass() { [ "$rc" = 0 ] && grep -q '^PASS' "$L/$1.log"; echo $?; } # NAME: 0 if it exited 0 and printed PASS
rows() { [ -s "$1" ] && $PY -c 'import json, sys; print(len(json.load(open(sys.argv[1]))), "rows")' "$1" 2>/dev/null || echo "no JSON"; }

unpack() { # DIR: DIR, unpacked from DIR.tar.xz if only that travelled
    [ -d "$1" ] || [ ! -f "$1.tar.xz" ] || tar -C "$(dirname "$1")" -xJf "$1.tar.xz" ||
        $PY -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1.tar.xz" "$(dirname "$1")"
    [ -d "$1" ] || { echo "no $1 (nor $1.tar.xz): stage it with $DEV/stage.sh and carry it"; return 1; }
}
targets() { # HARNESS: the staged test binaries of that harness (targets.tsv, written by stage.sh)
    awk -F'\t' -v h="$1" '$2 == "test" && $3 == h { sub(/^test-/, "", $1); print $1 }' "$STAGE/targets.tsv" 2>/dev/null
}
gpus() { nvidia-smi -L 2>/dev/null | grep -c '^GPU'; }

# tests TAG THREADS [T[:FILTER]...]: each test binary T (default: the libtest-mimic ones, or the
# built-in ones for cpu-tests), optionally under a sanitizer ($SANITIZER); a libtest-mimic one
# with --include-ignored, a built-in one plainly (its ignored tests are development aids)
tests() {
    local tag=$1 threads=$2 spec t f name; shift 2
    local -a list=("$@") args=()
    if [ ${#list[@]} = 0 ]; then
        if [ "$tag" = cpu-tests ]; then
            mapfile -t list < <(targets libtest | grep -vx ui)
        else
            # candle_gpu from this stage is built without candle's `cuda` feature (its tests
            # can only be ignored): its GPU build is the `candle` mode's. The targets that need no
            # GPU (NVRTC compiles, ptxas reports, the host emulator, which also needs a C++
            # compiler) are CPU tests that CI runs: name them to run them here.
            mapfile -t list < <(targets custom |
                grep -vxE 'candle_gpu|emitted_cuda|ptxas_resources|emulated_cuda|emulated_tensor_cores')
        fi
        [ ${#list[@]} -gt 0 ] || { verdict "$tag" 1 "no test binaries in $STAGE/targets.tsv (stage.sh writes it)"; return; }
    fi
    for spec in "${list[@]}"; do
        t=${spec%%:*} f=$([[ $spec == *:* ]] && echo "${spec#*:}")
        name=$(fresh "$tag-$t${f:+-${f//\//_}}") # a filter's '/' (name/gpu) is no file name
        [ -x "$STAGE/test-$t" ] || { verdict "$name" 1 "no $STAGE/test-$t"; continue; }
        args=(--test-threads="$threads")
        if targets custom | grep -qx "$t"; then
            args+=(--include-ignored)
            # which also runs the test that needs two GPUs: with one it can only fail
            [ "$(gpus)" -ge 2 ] || args+=(--skip two_gpus_from_two_threads)
        fi
        # shellcheck disable=SC2086  # the sanitizer's words
        step "$name" ${SANITIZER:+compute-sanitizer --tool $SANITIZER --error-exitcode 9} "$STAGE/test-$t" $f "${args[@]}"
        verdict "$name" $rc "rc $rc; $(last '^test result|SUMMARY' "$name")"
    done
}

bench() { # NAME: one bench process, its rows in $L/NAME.json
    local b=$1 name; name=$(fresh "bench-$1")
    [ -x "$STAGE/bench-$b" ] || { verdict "$name" 1 "no $STAGE/bench-$b"; return; }
    step "$name" env FUSE_BENCH_JSON="$L/$name.json" "$STAGE/bench-$b" --bench
    verdict "$name" $rc "rc $rc; $(rows "$L/$name.json")"
}

peer() { # NAME[:ARG,...]: one peer script in a folder of its own ($OUT there), its JSON as $L/peer-NAME.json
    local script=${1%%:*} words="" name dir rc2
    [[ $1 == *:* ]] && words=${1#*:}
    name=$(fresh "peer-$script${words:+-${words//,/-}}")
    [ -f "$DEV/peers/$script.py" ] || { verdict "$name" 1 "no $DEV/peers/$script.py"; return; }
    dir=$L/$name.out && mkdir -p "$dir"
    # shellcheck disable=SC2086  # the arguments are words
    step "$name" env OUT="$PWD/$dir" $PY "$DEV/peers/$script.py" ${words//,/ }
    rc2=$rc
    set -- "$dir"/*.json
    [ -f "$1" ] && mv "$1" "$L/$name.json"
    rm -rf "$dir"
    verdict "$name" $rc2 "rc $rc2; $(rows "$L/$name.json")"
}

ab() { # BEFORE AFTER: $AB_BENCHES in alternated processes; ab.md
    local before=${1%/} after=${2%/} r b side dir name
    if ! unpack "$before" || ! unpack "$after"; then verdict ab 1 "a stage is missing"; return; fi
    for r in $(seq 1 "${AB_ROUNDS:-2}"); do
        for b in ${AB_BENCHES:-anchors matmul}; do
            for side in $([ $((r % 2)) = 1 ] && echo before after || echo after before); do
                dir=$before; [ "$side" = after ] && dir=$after
                name=ab-$side-$b-$r
                [ -x "$dir/bench-$b" ] || { verdict "$name" 1 "no $dir/bench-$b"; continue; }
                local -a env=()
                # shellcheck disable=SC2206  # "VAR=value ..." are words
                if [ "$side" = before ]; then env=(${AB_BEFORE_ENV:-}); else env=(${AB_AFTER_ENV:-}); fi
                step "$name" env "${env[@]}" FUSE_BENCH_JSON="$L/$name.json" "$dir/bench-$b" --bench
                verdict "$name" $rc "rc $rc; $(rows "$L/$name.json")"
            done
        done
    done
    table ab "before $before ($(head -c 12 "$before/commit.txt" 2>/dev/null)${AB_BEFORE_ENV:+; $AB_BEFORE_ENV})," \
        "after $after ($(head -c 12 "$after/commit.txt" 2>/dev/null)${AB_AFTER_ENV:+; $AB_AFTER_ENV})" -- \
        ab --before "$L"/ab-before-*.json --after "$L"/ab-after-*.json
}

table() { # NAME TITLE... -- JOIN_ARGS...: join.py's table as $L/NAME.md (and $OUT/NAME.md)
    local name=$1 title=""; shift
    while [ "$1" != -- ]; do title="$title $1"; shift; done; shift
    { echo "#${title:+$title, }$(device_line)"; $PY "$DEV/join.py" "$@"; } >"$L/$name.md" 2>&1
    rc=$?
    cat "$L/$name.md"
    [ -n "${OUT:-}" ] && cp "$L/$name.md" "$OUT/"
    verdict "$name" $rc "$L/$name.md"
}
device_line() { echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi'), $(date -u +%F)"; }

candle() { # fuse-candle's CUDA build (scripts/build_candle_gpu.sh): its example and GPU tests
    local d=/tmp/fuse-candle-gpu
    [ -f .gpu2/candle-gpu.tar.xz ] || { verdict candle 1 "no .gpu2/candle-gpu.tar.xz (scripts/build_candle_gpu.sh; carry .gpu2)"; return; }
    rm -rf $d && mkdir -p $d && tar -xJf .gpu2/candle-gpu.tar.xz -C $d
    step candle-example $d/candle_layernorm
    verdict candle-example "$(said_pass candle-example)" "rc $rc"
    step candle-tests $d/test-candle_gpu --include-ignored
    verdict candle-tests $rc "rc $rc; $(last '^test result' candle-tests)"
}

run_mode() { # MODE ARGS...
    local mode=$1 e x; shift
    case $mode in
    examples)
        if [ $# -gt 0 ]; then set -- "${@/#/$STAGE/example-}"; else set -- "$STAGE"/example-*; fi
        [ -x "$1" ] || { verdict examples 1 "no $1"; return; }
        for e in "$@"; do
            x=$(fresh "${e##*/}")
            step "$x" "$e"
            verdict "$x" "$(said_pass "$x")" "rc $rc"
        done ;;
    gpu-tests | cpu-tests) tests "$mode" "${TEST_THREADS:-4}" "$@" ;;
    memcheck | racecheck | synccheck) SANITIZER=$mode tests "$mode" 1 "$@" ;;
    bench) for x in "$@"; do bench "$x"; done ;;
    bench-all)
        set -- "$STAGE"/bench-*
        [ -x "$1" ] || { verdict bench-all 1 "no $STAGE/bench-*"; return; }
        for x in "$@"; do bench "${x##*/bench-}"; done ;;
    peers) [ $# -gt 0 ] || set -- "${PEERS[@]}"; for x in "$@"; do peer "$x"; done ;;
    ab) ab "$@" ;;
    join)
        local -a files=()
        for x in "$L"/bench-*.json "$L"/peer-*.json; do [ -f "$x" ] && files+=("$x"); done
        set -- "${files[@]}"
        [ $# -gt 0 ] || { verdict join 1 "no bench or peer JSON yet (run bench or peers before join)"; return; }
        table join "fuse beside its peers" -- "$@" ;;
    candle) candle ;;
    esac
}

known() { # MODE ARG: whether ARG names something MODE can run (else it is likely a misspelt mode)
    case $1 in
    examples) [ -x "$STAGE/example-$2" ] ;;
    gpu-tests | cpu-tests | memcheck | racecheck | synccheck) [ -x "$STAGE/test-${2%%:*}" ] ;;
    bench) [ -x "$STAGE/bench-$2" ] ;;
    peers) [ -f "$DEV/peers/${2%%:*}.py" ] ;;
    ab) [ -d "$2" ] || [ -f "$2.tar.xz" ] ;;
    *) false ;;
    esac
}

# Parse every mode first, so that a misspelt one costs no device time.
[ $# -gt 0 ] || usage
argv="$*"
unpack "$STAGE" >/dev/null 2>&1 || true # a mode that needs it says so
declare -a plan=()
while [ $# -gt 0 ]; do
    is_mode "$1" || { echo "unknown mode '$1'"; usage; }
    m=$1 && shift
    a=""
    while [ $# -gt 0 ] && ! is_mode "$1"; do
        known "$m" "$1" || { echo "'$1' (after $m) is neither a mode nor something $m can run here"; exit 2; }
        a="$a $1" && shift
    done
    case $m in
    bench) [ -n "$a" ] || { echo "bench needs a name (or bench-all)"; exit 2; } ;;
    ab) [ "$(wc -w <<<"$a")" = 2 ] || { echo "ab needs BEFORE_DIR AFTER_DIR"; exit 2; } ;;
    esac
    plan+=("$m$a")
done

[ "${KEEP_LOGS:-0}" = 1 ] || rm -rf "$L"
mkdir -p "$L"
[ -n "${OUT:-}" ] && mkdir -p "$OUT"
{
    echo "# $(device_line); $(date -u +%FT%TZ)"
    echo "# stage $STAGE: $(head -1 "$STAGE/commit.txt" 2>/dev/null || echo 'no commit.txt')"
    echo "# $0 $argv"
} | tee -a "$L/summary.txt"
summary=() status=0
for p in "${plan[@]}"; do
    ok=0 bad=()
    # shellcheck disable=SC2086  # a mode and its words
    run_mode $p
    if [ ${#bad[@]} = 0 ]; then line="PASS    $p ($ok passed)"; else line="FAILED  $p (${#bad[@]} failed: ${bad[*]}; $ok passed)"; status=1; fi
    summary+=("$line")
    echo "$line" >>"$L/summary.txt"
    pack
done
echo "== summary ($L/summary.txt; steps in steps.txt)"
printf '%s\n' "${summary[@]}"
[ -n "${OUT:-}" ] && cp "$L/summary.txt" "$OUT/summary.txt"
pack
exit $status
