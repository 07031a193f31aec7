#!/bin/sh
# run.sh — `make fuzz` and `make fuzz-regress`: sh fuzz/run.sh fuzz|regress BUILD_DIR TARGET...
# regress: replays every input of fuzz/regressions/<target>/ (crashes found and fixed) once.
# fuzz: replays them, then runs each harness for $FUZZ_SECONDS (default 60) on a working copy of its
# corpus, BUILD_DIR/corpus/<target> (new inputs go there, the committed seeds in fuzz/corpus/<target>
# stay as they are). A crash, leak, timeout or sanitizer report stops that harness; its input is kept
# in BUILD_DIR/crashes/<target>/ and the run fails after the remaining targets have had their turn.
set -e
mode=$1 build=$2
shift 2
seconds=${FUZZ_SECONDS:-60}
failed=""
# leaks are checked (libFuzzer's -detect_leaks=1 default); a UB report is an error, not a warning
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=abort_on_error=1
for t in "$@"; do
    bin=$build/fuzz_$t
    if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls "fuzz/regressions/$t")" ]; then
        echo "fuzz: $t: replaying $(ls "fuzz/regressions/$t" | wc -l) regression inputs"
        "$bin" -runs=1 fuzz/regressions/"$t"/* >"$build/regress_$t.log" 2>&1 ||
            { tail -40 "$build/regress_$t.log"; failed="$failed $t(regression)"; }
    fi
    [ "$mode" = fuzz ] || continue
    mkdir -p "$build/corpus/$t" "$build/crashes/$t"
    echo "fuzz: $t: ${seconds} s"
    if nice "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" "fuzz/corpus/$t" >"$build/fuzz_$t.log" 2>&1; then
        grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$build/fuzz_$t.log" | tr '\n' ' '
        echo
    else
        tail -40 "$build/fuzz_$t.log"
        echo "fuzz: $t: FAILED; the input is in $build/crashes/$t/ (log: $build/fuzz_$t.log)"
        failed="$failed $t"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: all targets passed"
