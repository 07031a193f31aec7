#!/bin/sh
# train_e2e.sh — GPT-2 124M fp32 training throughput in one run: gptc with its best kernels, gptc
# with GPTC_KERNELS=ref, and PyTorch (bench/torch_train_bench.py, Debian's torch) twice: on
# Debian's OpenMP build of OpenBLAS (libopenblas0-openmp, the peer the ratio is taken against) and
# on its pthreads build (libopenblas0-pthread, what the alternatives system picks by default), at
# B=4 and T in $TS (default "64 256"), on $THREADS threads; prints a Markdown table with tokens/s,
# the ratios and MFU against the peak gptc measures in the same run (PaLM's FLOP convention, see
# gptc_model_flops_per_token). Settings: THREADS (2), STEPS (5), REF_STEPS (2), TS ("64 256").
set -e
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-5}
REF_STEPS=${REF_STEPS:-2}
TS=${TS:-64 256}
GPTC=build/gptc
DATA=build/data/shakespeare-gpt2
[ -x "$GPTC" ] || { echo "train_e2e: $GPTC not found; run make first" >&2; exit 1; }
[ -f "$DATA/meta.json" ] || "$GPTC" prepare --tokenizer gpt2 data/tinyshakespeare.txt --out "$DATA" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

field() { # the number before word $2 on the last line of $1 matching $3
    awk -v w="$2" -v p="$3" 'index($0, p) { for (i = 2; i <= NF; i++) if ($i ~ "^" w) v = $(i - 1) } END { print v }' "$1"
}

BLAS_DIR=/usr/lib/x86_64-linux-gnu
for v in openmp pthread; do
    [ -f "$BLAS_DIR/openblas-$v/libblas.so.3" ] || { echo "train_e2e: $BLAS_DIR/openblas-$v missing; run sh tools/setup.sh --bench" >&2; exit 1; }
done

echo "| T | gptc tokens/s | gptc ref tokens/s | PyTorch (OpenBLAS OpenMP) tokens/s | PyTorch (OpenBLAS pthreads) tokens/s | gptc / PyTorch OpenMP | gptc / PyTorch pthreads | gptc / ref | gptc MFU | PyTorch OpenMP MFU |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for T in $TS; do
    "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$T" --steps "$STEPS" --threads "$THREADS" \
        --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$tmp/best.log" 2>&1 || { cat "$tmp/best.log" >&2; exit 1; }
    GPTC_KERNELS=ref "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$T" --steps "$REF_STEPS" \
        --threads "$THREADS" --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$tmp/ref.log" 2>&1 || { cat "$tmp/ref.log" >&2; exit 1; }
    for v in openmp pthread; do
        LD_LIBRARY_PATH="$BLAS_DIR/openblas-$v" /usr/bin/python3 bench/torch_train_bench.py --batch 4 --seq "$T" \
            --threads "$THREADS" --steps "$STEPS" >"$tmp/torch-$v.log" 2>&1 || { cat "$tmp/torch-$v.log" >&2; exit 1; }
        grep -q "openblas-$v" "$tmp/torch-$v.log" || { echo "train_e2e: torch did not load openblas-$v" >&2; exit 1; }
    done
    g=$(field "$tmp/best.log" "tokens/s" "train: median")
    r=$(field "$tmp/ref.log" "tokens/s" "train: median")
    t=$(field "$tmp/torch-openmp.log" "tokens/s" "torch: median")
    tp=$(field "$tmp/torch-pthread.log" "tokens/s" "torch: median")
    flops=$(field "$tmp/best.log" "model" "FLOPs/token")
    peak=$(awk '/measured/ && /peak/ { for (i = 1; i <= NF; i++) if ($i == "peak") print $(i + 1) }' "$tmp/best.log")
    awk -v T="$T" -v g="$g" -v r="$r" -v t="$t" -v tp="$tp" -v f="$flops" -v p="$peak" 'BEGIN {
        printf "| %d | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx | %.1f%% | %.1f%% |\n", T, g, r, t, tp,
               g / t, g / tp, g / r, 100 * g * f / 1e9 / p, 100 * t * f / 1e9 / p }'
done
echo
echo "B=4, fp32, $THREADS threads; median step of $STEPS steps ($REF_STEPS for ref); peak measured by gptc's FMA probe in the same run."
