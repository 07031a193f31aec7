#!/bin/sh
# pin_jitter.sh — step-time jitter with and without --pin: the same GPT-2 124M training run, RUNS
# times each, alternating; each run's step-time p50, p95 and stdev (% of the mean) as `gptc train`
# prints them over all its steps, then the medians. Settings: MODEL (gpt2), B (4), T (64),
# STEPS (30), THREADS (2), RUNS (3).
set -e
cd "$(dirname "$0")/.."
MODEL=${MODEL:-gpt2}; B=${B:-4}; T=${T:-64}; STEPS=${STEPS:-30}; THREADS=${THREADS:-2}; RUNS=${RUNS:-3}
make -s build/gptc >/dev/null
. bench/lib.sh
bench_data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pin_jitter.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

run() { # extra-flags -> "p50 p95 stdev"
    build/gptc train --model "$MODEL" --data "$DATA" --batch "$B" --seq "$T" --steps "$STEPS" --threads "$THREADS" \
        --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet $1 >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    # train: step time p50 X ms, p95 Y ms, stdev Z% of the mean over N steps; ...
    awk '/^train: step time/ { gsub(/[,%]/, ""); print $5, $8, $11 }' "$tmp/log"
}

echo "| run | pinned | p50 ms | p95 ms | stdev % of mean |"
echo "| ---: | --- | ---: | ---: | ---: |"
for i in $(seq "$RUNS"); do
    for pin in no yes; do
        flags=""; [ "$pin" = yes ] && flags="--pin"
        set -- $(run "$flags")
        echo "$1 $2 $3" >>"$tmp/$pin"
        echo "| $i | $pin | $1 | $2 | $3 |"
    done
done
for pin in no yes; do
    p50=$(cut -d' ' -f1 "$tmp/$pin" | median); p95=$(cut -d' ' -f2 "$tmp/$pin" | median); sd=$(cut -d' ' -f3 "$tmp/$pin" | median)
    echo "| median | $pin | $p50 | $p95 | $sd |"
done
echo
echo "$MODEL, B=$B, T=$T, $THREADS threads, $STEPS steps per run"
