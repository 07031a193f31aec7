#!/bin/sh
# lora.sh — fine-tuning on a small machine, measured: GPT-2 124M fine-tuned in full, with its embeddings
# and first ten blocks frozen, and with LoRA r=8 (with and without --pack-weights auto's packed copies of
# the frozen base, which it keeps where the run fits in half of the machine's memory), side by side, from one base model (a random init trained PRE steps on GPT-2-tokenized tiny Shakespeare,
# made once under build/bench-lora), each for STEPS steps on the same data under /usr/bin/time -v; then
# GPT-2 XL with LoRA r=8 (a random-init base: its memory, not its loss, is the point) for XL_STEPS steps.
# Prints per run: peak RSS (time -v), gptc plan's total (for what the run kept: --pack-weights where it
# packed), median ms/step, the step's FLOPs per token as
# gptc counts them, trained parameters, and the val loss before and after (eval over EVAL batches).
#
#   sh bench/lora.sh          settings as NAME=VALUE arguments or in the environment: PRE (300), STEPS (100),
#                             B (4), T (64), THREADS (2), EVAL (20), XL_STEPS (3), XL (1: run the XL part),
#                             SMALL (1: run the 124M part)
# Learning rates: the base 6e-4 (warm-up 30, cosine down to 6e-5); full fine-tuning 3e-5, LoRA 3e-4 (alpha
# 16 = 2r), both with a 10-step warm-up and --seed 2 (another order of the windows than the base's): LoRA's
# few parameters take the usual ten-times larger rate. (At 1e-4 / 1e-3 both raised the val loss: Adam's
# fresh moments make the first steps move every weight by about lr.) Run from the repository root after
# `make`, with nothing else running.
set -e
for arg in "$@"; do
    case "$arg" in
        PRE=* | STEPS=* | B=* | T=* | THREADS=* | EVAL=* | XL_STEPS=* | XL=* | SMALL=*) eval "${arg%%=*}=\${arg#*=}" ;;
        *) echo "lora: unknown argument '$arg' (expected PRE=, STEPS=, B=, T=, THREADS=, EVAL=, XL_STEPS=, XL=, SMALL=)" >&2; exit 2 ;;
    esac
done
. bench/lib.sh
GPTC=${GPTC:-build/gptc}
[ -x "$GPTC" ] || { echo "lora: $GPTC not found; run make first" >&2; exit 1; }
PRE=${PRE:-300}
STEPS=${STEPS:-100}
B=${B:-4}
T=${T:-64}
THREADS=${THREADS:-2}
EVAL=${EVAL:-20}
XL_STEPS=${XL_STEPS:-3}
XL=${XL:-1}
SMALL=${SMALL:-1}
bench_data
OUT=build/bench-lora
BASE=$OUT/base-$PRE
COMMON="--data $DATA --batch $B --seq $T --threads $THREADS --pin --eval-every 0 --eval-batches $EVAL"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; GPT-2 124M, B=$B T=$T, $THREADS threads"
if [ "$SMALL" = 1 ] && [ ! -d "$BASE" ]; then
    echo "base: gptc train --model gpt2 $COMMON --steps $PRE --lr 6e-4 --warmup 30 --ckpt $BASE"
    $GPTC train --model gpt2 $COMMON --steps "$PRE" --lr 6e-4 --warmup 30 --ckpt "$BASE" --ckpt-every 0 >"$OUT-base.txt" 2>&1 ||
        { tail -5 "$OUT-base.txt"; exit 1; }
    grep '^train: median' "$OUT-base.txt"
fi

printf '%-22s %9s %9s %9s %12s %12s %s\n' run "RSS MiB" "plan MiB" "ms/step" "FLOPs/token" trained "val loss before -> after"
# run NAME PLANFLAGS -- TRAINFLAGS: one fine-tuning run from the base, a row of the table
run() {
    name=$1 plan=$2 flags=$3 model=$4
    dir=$(mktemp -d /tmp/gptc-lora.XXXXXX)
    /usr/bin/time -v -o "$dir/time.txt" $GPTC train $COMMON $flags --ckpt "$dir/run" --ckpt-every 0 >"$dir/train.txt" 2>&1 ||
        { echo "$name: gptc train failed:"; tail -5 "$dir/train.txt"; return; }
    # the plan of what the run did: with its weight matrices kept packed where --pack-weights (auto) kept them
    grep -q '^pack-weights: the weight matrices are kept packed' "$dir/train.txt" && plan="$plan --pack-weights"
    planned=$($GPTC plan --model "$model" --batch "$B" --seq "$T" --threads "$THREADS" --bytes $plan | awk '$1 == "total" { print $4 }')
    rss=$(awk -F: '/Maximum resident set size/ { print $2 }' "$dir/time.txt")
    awk -v n="$name" -v r="$rss" -v p="$planned" '
        /^model: / { if (match($0, /[0-9.]+M parameters/)) params = substr($0, RSTART, RLENGTH - 11) }
        /trains [0-9]/ { tr = $0; sub(/.*trains /, "", tr); sub(/ .*/, "", tr) }
        $1 == "train:" && $2 == "median" { ms = $3; v = $0; sub(/.*val loss /, "", v); sub(/\).*/, "", v) }
        /model FLOPs\/token,/ { f = $2 }
        END { printf "%-22s %9.0f %9.0f %9.1f %12s %12s %s\n", n, r / 1024, p / 1048576, ms, f, tr ? tr : params, v }' "$dir/train.txt"
    echo "  (log $dir/train.txt)"
}
[ "$SMALL" = 1 ] && run "full fine-tune" "" "--init $BASE --seed 2 --steps $STEPS --lr 3e-5 --warmup 10" gpt2
[ "$SMALL" = 1 ] && run "freeze wte,wpe,h.0-9.*" "--freeze wte,wpe,h.0-9.*" "--init $BASE --seed 2 --steps $STEPS --lr 3e-5 --warmup 10 --freeze wte,wpe,h.0-9.*" gpt2
[ "$SMALL" = 1 ] && run "LoRA r=8 attn,mlp" "--lora 8 --lora-targets attn,mlp" "--init $BASE --seed 2 --steps $STEPS --lr 3e-4 --warmup 10 --lora 8 --lora-alpha 16 --lora-targets attn,mlp" gpt2
# the same without the packed copies of the frozen base (--pack-weights auto keeps them where the run fits
# in half of the machine's memory; a small machine's run is this one)
[ "$SMALL" = 1 ] && run "  --pack-weights off" "--lora 8 --lora-targets attn,mlp" "--init $BASE --seed 2 --steps $STEPS --lr 3e-4 --warmup 10 --lora 8 --lora-alpha 16 --lora-targets attn,mlp --pack-weights off" gpt2
if [ "$XL" = 1 ]; then
    B=1 T=1024
    COMMON="--data $DATA --batch 1 --seq 1024 --threads $THREADS --pin --eval-every 0 --eval-batches 1"
    run "XL LoRA r=8, block" "--lora 8 --lora-targets attn,mlp --recompute block" \
        "--model gpt2-xl --steps $XL_STEPS --lr 1e-3 --warmup 1 --lora 8 --lora-alpha 16 --lora-targets attn,mlp --recompute block" gpt2-xl
fi
