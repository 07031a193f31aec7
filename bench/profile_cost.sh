#!/bin/sh
# profile_cost.sh — what the profiler's instrumentation costs. The same GPT-2 124M training run with
# the spans compiled out (a second build, -DGPTC_PROFILE_COMPILED_OUT, in build-noprof/), compiled in
# but off (the normal build: one flag test per span), and on (--profile FILE.json), interleaved (in
# rotating order) so that machine noise hits all three alike, RUNS times each. Prints every run's median ms/step, then
# the median of the runs and the ratios to the compiled-out build. Settings: MODEL (gpt2), B (4),
# T (64), STEPS (8), THREADS (2), RUNS (9).
set -e
cd "$(dirname "$0")/.."
MODEL=${MODEL:-gpt2}; B=${B:-4}; T=${T:-64}; STEPS=${STEPS:-8}; THREADS=${THREADS:-2}; RUNS=${RUNS:-9}
make -s build/gptc >/dev/null
make -s BUILD=build-noprof EXTRA_CFLAGS=-DGPTC_PROFILE_COMPILED_OUT build-noprof/gptc >/dev/null
. bench/lib.sh
bench_data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/profile_cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

run() { # binary extra-flags -> median ms/step
    $1 train --model "$MODEL" --data "$DATA" --batch "$B" --seq "$T" --steps "$STEPS" --threads "$THREADS" \
        --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet $2 >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    awk '/^train: median/ { print $3 }' "$tmp/log"
}

echo "| run | compiled out ms/step | in, off ms/step | on (--profile) ms/step |"
echo "| ---: | ---: | ---: | ---: |"
for i in $(seq "$RUNS"); do
    # the order rotates from round to round, so that no variant always runs first
    case $((i % 3)) in
        1) a=$(run build-noprof/gptc ""); b=$(run build/gptc ""); c=$(run build/gptc "--profile $tmp/trace.json") ;;
        2) b=$(run build/gptc ""); c=$(run build/gptc "--profile $tmp/trace.json"); a=$(run build-noprof/gptc "") ;;
        0) c=$(run build/gptc "--profile $tmp/trace.json"); a=$(run build-noprof/gptc ""); b=$(run build/gptc "") ;;
    esac
    echo "$a" >>"$tmp/a"; echo "$b" >>"$tmp/b"; echo "$c" >>"$tmp/c"
    echo "| $i | $a | $b | $c |"
done
ma=$(median <"$tmp/a"); mb=$(median <"$tmp/b"); mc=$(median <"$tmp/c")
echo "| median | $ma | $mb | $mc |"
awk -v a="$ma" -v b="$mb" -v c="$mc" 'BEGIN { printf "\noff / compiled out: %.3f; on / compiled out: %.3f (%s, B=%s, T=%s, %s threads, median of %s steps per run)\n", b / a, c / a, "'"$MODEL"'", "'"$B"'", "'"$T"'", "'"$THREADS"'", "'"$STEPS"'" }'
