#!/bin/sh
# train_vs_torch.sh — compares training throughput of gptc and PyTorch (bench/torch_train_bench.py)
# on GPT-2 124M at the same shapes, in one invocation: runs `build/gptc train --pin` on the GPT-2 BPE
# tiny Shakespeare data (preparing it first if needed), then the PyTorch benchmark in its strongest
# configuration (bench/lib.sh's peer_run: tcmalloc, OpenBLAS's OpenMP build, AVX-512 kernels where
# the CPU has them, pinned threads; printed first), then prints both tokens/s and the ratio gptc/torch.
# Settings come from the environment or NAME=VALUE arguments (arguments win):
#   B (4)  T (64)  THREADS (2)  STEPS (10)  PYTHON (/usr/bin/python3)
#   e.g.  sh bench/train_vs_torch.sh B=8 T=128 THREADS=4
# Run from anywhere; paths are relative to the repository root. `make bench` builds gptc first.
set -e

for arg in "$@"; do
    case "$arg" in
        B=*) B=${arg#B=} ;;
        T=*) T=${arg#T=} ;;
        THREADS=*) THREADS=${arg#THREADS=} ;;
        STEPS=*) STEPS=${arg#STEPS=} ;;
        PYTHON=*) PYTHON=${arg#PYTHON=} ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "train_vs_torch: unknown argument '$arg' (expected B=, T=, THREADS=, STEPS=, PYTHON=)" >&2; exit 2 ;;
    esac
done
B=${B:-4}
T=${T:-64}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
PYTHON=${PYTHON:-/usr/bin/python3}

for v in "B=$B" "T=$T" "THREADS=$THREADS" "STEPS=$STEPS"; do
    n=${v#*=}
    case "$n" in
        ''|*[!0-9]*) n=0 ;;
    esac
    if [ "$n" -le 0 ] 2>/dev/null || [ ${#n} -gt 9 ]; then
        echo "train_vs_torch: ${v%%=*} must be a positive integer, got '${v#*=}'" >&2
        exit 2
    fi
done

cd "$(dirname "$0")/.."
GPTC=build/gptc
. bench/lib.sh
if [ ! -x "$GPTC" ]; then
    echo "train_vs_torch: $GPTC not found; build it first (make, or make bench)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_vs_torch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# Runs a command with its output shown live and saved to $1; fails if the command fails.
run_logged() {
    log=$1
    shift
    { "$@" && echo 0 >"$log.rc" || echo $? >"$log.rc"; } 2>&1 | tee "$log"
    rc=$(cat "$log.rc")
    if [ "$rc" != 0 ]; then
        echo "train_vs_torch: '$*' failed with status $rc" >&2
        exit "$rc"
    fi
}

# The number just before "tokens/s" on the last line starting with $1.
tokens_per_s() {
    awk -v p="$1" 'index($0, p) == 1 { for (i = 2; i <= NF; i++) if ($i ~ /^tokens\/s/) v = $(i - 1) }
                   END { if (v == "") exit 1; print v }' "$2"
}

if [ ! -f "$DATA/meta.json" ]; then
    echo "== preparing $DATA"
    "$GPTC" prepare --tokenizer gpt2 data/tinyshakespeare.txt --out "$DATA"
fi

echo "== gptc: B=$B T=$T threads=$THREADS steps=$STEPS, --pin (OMP_PROC_BIND/OMP_PLACES unset: see bench/lib.sh)"
run_logged "$tmp/gptc.log" env -u OMP_PROC_BIND -u OMP_PLACES "$GPTC" train --model gpt2 --data "$DATA" \
    --batch "$B" --seq "$T" --steps "$STEPS" --threads "$THREADS" --pin --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet

echo "== torch: B=$B T=$T threads=$THREADS steps=$STEPS"
peer_setup "$THREADS" || exit 1
run_logged "$tmp/torch.log" peer_run "$PYTHON" bench/torch_train_bench.py --batch "$B" --seq "$T" \
    --threads "$THREADS" --steps "$STEPS"

g=$(tokens_per_s "train: median" "$tmp/gptc.log") || {
    echo "train_vs_torch: no 'train: median ... tokens/s' line in gptc's output" >&2; exit 1; }
t=$(tokens_per_s "torch: median" "$tmp/torch.log") || {
    echo "train_vs_torch: no 'torch: median ... tokens/s' line in the torch output" >&2; exit 1; }

echo "== summary (GPT-2 124M, B=$B T=$T threads=$THREADS, $STEPS steps)"
awk -v g="$g" -v t="$t" 'BEGIN {
    printf "gptc:  %10.1f tokens/s\n", g
    printf "torch: %10.1f tokens/s\n", t
    if (t > 0) printf "ratio gptc/torch: %.2fx\n", g / t
    else print "ratio gptc/torch: n/a (torch reported 0 tokens/s)"
}'
