#!/bin/sh
# train_e2e.sh — GPT-2 124M fp32 training throughput in one run: gptc with its best kernels, gptc
# with GPTC_KERNELS=ref, and PyTorch (bench/torch_train_bench.py, Debian's torch with OpenBLAS), at
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

echo "| T | gptc tokens/s | gptc ref tokens/s | PyTorch tokens/s | gptc / PyTorch | gptc / ref | gptc MFU | PyTorch MFU |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for T in $TS; do
    "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$T" --steps "$STEPS" --threads "$THREADS" \
        --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$tmp/best.log" 2>&1 || { cat "$tmp/best.log" >&2; exit 1; }
    GPTC_KERNELS=ref "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$T" --steps "$REF_STEPS" \
        --threads "$THREADS" --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$tmp/ref.log" 2>&1 || { cat "$tmp/ref.log" >&2; exit 1; }
    /usr/bin/python3 bench/torch_train_bench.py --batch 4 --seq "$T" --threads "$THREADS" --steps "$STEPS" \
        >"$tmp/torch.log" 2>&1 || { cat "$tmp/torch.log" >&2; exit 1; }
    g=$(field "$tmp/best.log" "tokens/s" "train: median")
    r=$(field "$tmp/ref.log" "tokens/s" "train: median")
    t=$(field "$tmp/torch.log" "tokens/s" "torch: median")
    flops=$(field "$tmp/best.log" "model" "FLOPs/token")
    peak=$(awk '/measured peak/ { for (i = 1; i <= NF; i++) if ($i == "peak") print $(i + 1) }' "$tmp/best.log")
    awk -v T="$T" -v g="$g" -v r="$r" -v t="$t" -v f="$flops" -v p="$peak" 'BEGIN {
        printf "| %d | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.1f%% | %.1f%% |\n", T, g, r, t, g / t, g / r,
               100 * g * f / 1e9 / p, 100 * t * f / 1e9 / p }'
done
echo
echo "B=4, fp32, $THREADS threads; median step of $STEPS steps ($REF_STEPS for ref); peak measured by gptc's FMA probe in the same run."
