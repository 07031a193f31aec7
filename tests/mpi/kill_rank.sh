#!/bin/sh
# kill_rank.sh — what happens to an MPI job when one of its 2 ranks dies or hangs. Each case starts
# `mpirun -np 2` in the background, waits until the job is working (and, for gptc, until the first
# checkpoint is on disk), hits rank 1 with a signal, and requires that mpirun exits non-zero within
# KILL_BOUND_S seconds (default 30) with output that names the failure:
#   sigkill   tests/mpi/hello_allreduce --loop, rank 1 SIGKILLed mid-collective;
#   watchdog  the same with --watchdog 3, rank 1 SIGSTOPped (alive but silent: Open MPI alone would
#             wait forever), so rank 0's watchdog must abort the job;
#   wdthread  the same with a blocking MPI_Allreduce and --watchdog-thread 3 (a thread that _exits);
#   gptc-kill `gptc train` on 2 ranks with checkpoints every 10 steps, rank 1 SIGKILLed after the
#             first checkpoint; then the newest checkpoint must still load (`gptc sample`);
#   gptc-stop the same with rank 1 SIGSTOPped: gptc's --comm-timeout 5 must end the job.
#             The gptc cases run only when GPTC_BIN is built with MPI (its `train --help` lists
#             --bucket-mb) and DATA is given.
# Prints "PASS: <case> ..." per case, "SKIP: <reason>" (exit 0) where mpirun or mpicc is missing, and
# "FAIL: ..." (exit 1) otherwise. Usage: [GPTC_BIN=build/gptc DATA=dir] sh tests/mpi/kill_rank.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bound=${KILL_BOUND_S:-30}
GPTC_BIN=${GPTC_BIN:-}
DATA=${DATA:-}

for tool in mpirun mpicc; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool not found (install openmpi-bin and libopenmpi-dev: sh tools/setup.sh)"
        exit 0
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gptc-kill-XXXXXX")
job=""
cleanup() {
    # only what this script started: the mpirun it launched and the ranks whose pids it recorded
    for f in "$work"/pid.*; do
        [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true
    done
    [ -n "$job" ] && kill -KILL "$job" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

mpirun_flags="--oversubscribe"
[ "$(id -u)" = 0 ] && mpirun_flags="$mpirun_flags --allow-run-as-root"

mpicc -O2 -o "$work/hello" "$here/hello_allreduce.c" || fail "mpicc could not build hello_allreduce.c"

# run_case NAME SIGNAL READY PROGRAM ARGS... — mpirun -np 2 PROGRAM ARGS in the background, each rank
# through `sh -c 'echo $$ > pid.RANK; exec ...'` so its pid is known; waits (up to 120 s) for both
# pid files and for the path READY to exist, sends SIGNAL to rank 1, then waits up to $bound seconds
# for mpirun to end. Sets case_rc, case_s (seconds from the signal to mpirun's exit); log in $work/NAME.log.
run_case() {
    name=$1 sig=$2 ready=$3
    shift 3
    rm -f "$work"/pid.*
    # shellcheck disable=SC2086
    mpirun $mpirun_flags -np 2 sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$work" "$@" \
        >"$work/$name.log" 2>&1 &
    job=$!
    waited=0
    until [ -s "$work/pid.0" ] && [ -s "$work/pid.1" ] && ls -d $ready >/dev/null 2>&1; do
        kill -0 "$job" 2>/dev/null || { cat "$work/$name.log"; fail "$name: mpirun ended before the job was ready"; }
        [ "$waited" -ge 1200 ] && { cat "$work/$name.log"; fail "$name: not ready after 120 s"; }
        sleep 0.1
        waited=$((waited + 1))
    done
    victim=$(cat "$work/pid.1")
    t0=$(now)
    kill -s "$sig" "$victim"
    case_rc=""
    while :; do
        if ! kill -0 "$job" 2>/dev/null; then
            set +e
            wait "$job"
            case_rc=$?
            set -e
            break
        fi
        [ "$(awk -v a="$t0" -v n="$(now)" -v b="$bound" 'BEGIN { print (n - a > b) }')" = 1 ] && break
        sleep 0.05
    done
    case_s=$(elapsed "$t0" "$(now)")
    if [ -z "$case_rc" ]; then
        cat "$work/$name.log"
        fail "$name: mpirun still running $bound s after SIG$sig to rank 1 (pid $victim): the job hangs"
    fi
    job=""
    # mpirun has exited: no rank may outlive it by more than 3 s (the SIGSTOPped one included);
    # a zombie waiting for init to reap it counts as gone
    tries=0
    while :; do
        alive=""
        for f in "$work"/pid.*; do
            st=$(ps -o stat= -p "$(cat "$f")" 2>/dev/null || true)
            case $st in '' | Z*) ;; *) alive="${f##*/} (pid $(cat "$f"), state $st)" ;; esac
        done
        [ -z "$alive" ] && break
        [ "$tries" -ge 30 ] && fail "$name: $alive still alive 3 s after mpirun exited"
        sleep 0.1
        tries=$((tries + 1))
    done
}

# sigkill: Open MPI's own teardown when a rank dies mid-collective
run_case sigkill KILL "$work/stamp" "$work/hello" --loop --stamp "$work/stamp"
[ "$case_rc" -ne 0 ] || { cat "$work/sigkill.log"; fail "sigkill: mpirun exited 0 after rank 1 was killed"; }
grep -Eq 'signal 9|Killed' "$work/sigkill.log" || { cat "$work/sigkill.log"; fail "sigkill: output does not name the signal"; }
echo "PASS: sigkill: mpirun exited $case_rc $case_s s after SIGKILL to rank 1; it said:"
grep -E 'signal 9|Killed' "$work/sigkill.log" | head -n 2 | sed 's/^/    /'

# watchdog: a rank that stops answering; without a timeout the other rank would wait forever
run_case watchdog STOP "$work/stamp2" "$work/hello" --loop --watchdog 3 --stamp "$work/stamp2"
[ "$case_rc" -ne 0 ] || { cat "$work/watchdog.log"; fail "watchdog: mpirun exited 0"; }
grep -q 'watchdog' "$work/watchdog.log" || { cat "$work/watchdog.log"; fail "watchdog: output does not name the watchdog"; }
echo "PASS: watchdog: mpirun exited $case_rc $case_s s after SIGSTOP to rank 1 (watchdog 3 s); it said:"
grep 'watchdog' "$work/watchdog.log" | head -n 1 | sed 's/^/    /'

# watchdog-thread: the same, the collective a blocking MPI_Allreduce watched by a second thread
run_case wdthread STOP "$work/stamp3" "$work/hello" --loop --watchdog-thread 3 --stamp "$work/stamp3"
[ "$case_rc" -ne 0 ] || { cat "$work/wdthread.log"; fail "watchdog-thread: mpirun exited 0"; }
grep -q 'watchdog' "$work/wdthread.log" || { cat "$work/wdthread.log"; fail "watchdog-thread: output does not name the watchdog"; }
echo "PASS: watchdog-thread: mpirun exited $case_rc $case_s s after SIGSTOP to rank 1 (watchdog 3 s); it said:"
grep 'watchdog' "$work/wdthread.log" | head -n 1 | sed 's/^/    /'

# gptc: a real training run with checkpoints
if [ -z "$GPTC_BIN" ] || [ -z "$DATA" ]; then
    echo "note: gptc case not run (set GPTC_BIN and DATA)"
    exit 0
fi
if ! "$GPTC_BIN" train --help 2>&1 | grep -q -- '--bucket-mb'; then
    echo "note: gptc case not run: $GPTC_BIN is not built with MPI (no --bucket-mb in gptc train --help)"
    exit 0
fi
# gptc_case NAME SIGNAL PATTERN: 2 ranks of gptc train (tiny model, a checkpoint every 10 steps,
# --comm-timeout 5), SIGNAL to rank 1 once a checkpoint exists; mpirun must end non-zero in time with
# PATTERN in its output, and the newest checkpoint must load (`gptc sample` of that step folder).
gptc_case() {
    name=$1 sig=$2 pattern=$3
    ck="$work/ckpt-$name"
    run_case "$name" "$sig" "$ck/step-*" "$GPTC_BIN" train --data "$DATA" --model tiny --batch 2 --seq 32 \
        --steps 1000000 --ckpt "$ck" --ckpt-every 10 --keep 3 --eval-every 0 --threads 1 --comm-timeout 5
    [ "$case_rc" -ne 0 ] || { cat "$work/$name.log"; fail "$name: mpirun exited 0 after SIG$sig to rank 1"; }
    grep -Eq "$pattern" "$work/$name.log" || { tail -n 20 "$work/$name.log"; fail "$name: output does not name the failure"; }
    newest=$(ls -d "$ck"/step-* | sort | tail -n 1)
    "$GPTC_BIN" sample --ckpt "$newest" --prompt "ROMEO:" --tokens 5 --seed 1 >"$work/sample.log" 2>&1 ||
        { cat "$work/sample.log"; fail "$name: the newest checkpoint ($newest) does not load"; }
    echo "PASS: $name: mpirun exited $case_rc $case_s s after SIG$sig to rank 1; $(basename "$newest") still samples; it said:"
    tr '\r' '\n' <"$work/$name.log" | grep -E "$pattern" | head -n 1 | sed 's/^/    /'
}
gptc_case gptc-kill KILL 'signal 9|Killed'
gptc_case gptc-stop STOP 'comm timeout'
