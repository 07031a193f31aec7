#!/bin/sh
# mpi_scaling.sh — data parallel on this host: GPT-2 124M at one global batch (GB sequences of T
# tokens) trained by 1 rank on THREADS threads, and by 2 ranks (mpirun -np 2, GB/2 sequences and
# THREADS/2 threads each, so the same cores and the same tokens per step) with 25 MB gradient buckets,
# with one allreduce per tensor (--bucket-mb 0), and with 25 MB buckets and ZeRO-1; RUNS times each,
# interleaved. Prints every run's steps/s, tokens/s, MPI calls per step, ms per step waiting on
# communication after the backward and its share of the step, then the medians.
# Settings: GB (4), T (64), STEPS (6), THREADS (2), RUNS (3).
set -e
cd "$(dirname "$0")/.."
GB=${GB:-4}; T=${T:-64}; STEPS=${STEPS:-6}; THREADS=${THREADS:-2}; RUNS=${RUNS:-3}
make -s build/gptc >/dev/null
command -v mpirun >/dev/null || { echo "mpi_scaling: mpirun not found; run sh tools/setup.sh" >&2; exit 1; }
. bench/lib.sh
bench_data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpi_scaling.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca pml ob1"
HALF=$((THREADS / 2)); [ "$HALF" -ge 1 ] || HALF=1

run() { # name launcher batch threads extra -> "ms tok/s calls wait share"
    $2 build/gptc train --model gpt2 --data "$DATA" --batch "$3" --seq "$T" --steps "$STEPS" --threads "$4" \
        --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet $5 >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    awk 'BEGIN { c = 0; w = 0; s = 0 }
         /^train: median/ { ms = $3; tok = $5 }
         /^comm:/ { gsub(/[(%]/, ""); c = $4; w = $7; s = $10 }
         END { print ms, tok, c, w, s }' "$tmp/log"
}

echo "| run | setup | ms/step | steps/s | tokens/s | MPI calls/step | ms/step waiting | share of the step |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for i in $(seq "$RUNS"); do
    for setup in 1rank 2ranks-25MB 2ranks-per-tensor 2ranks-25MB-zero1; do
        case $setup in
            1rank) r=$(run $setup "" "$GB" "$THREADS" "") ;;
            2ranks-25MB) r=$(run $setup "$MPIRUN" $((GB / 2)) "$HALF" "--bucket-mb 25") ;;
            2ranks-per-tensor) r=$(run $setup "$MPIRUN" $((GB / 2)) "$HALF" "--bucket-mb 0") ;;
            2ranks-25MB-zero1) r=$(run $setup "$MPIRUN" $((GB / 2)) "$HALF" "--bucket-mb 25 --zero 1") ;;
        esac
        echo "$r" >>"$tmp/$setup"
        set -- $r
        echo "| $i | $setup | $1 | $(awk -v m="$1" 'BEGIN { printf "%.3f", 1000 / m }') | $2 | $3 | $4 | $5 % |"
    done
done
for setup in 1rank 2ranks-25MB 2ranks-per-tensor 2ranks-25MB-zero1; do
    m() { cut -d' ' -f"$1" "$tmp/$setup" | median; }
    ms=$(m 1)
    echo "| median | $setup | $ms | $(awk -v m="$ms" 'BEGIN { printf "%.3f", 1000 / m }') | $(m 2) | $(m 3) | $(m 4) | $(m 5) % |"
done
echo
echo "GPT-2 124M, global batch $GB x $T tokens, $THREADS cores in all, median of $STEPS steps per run, fp32"
