#!/bin/sh
# train_e2e.sh — GPT-2 124M fp32 training speed in one run, at B=4 and each T in $TS, on $THREADS
# threads: gptc with its best kernels, gptc with GPTC_KERNELS=ref, PyTorch (bench/torch_train_bench.py,
# Debian's torch) in its strongest configuration on this machine, and, when LLMC names a copy of
# llm.c's train_gpt2.c, llm.c's CPU trainer. Prints the configurations, then a Markdown table of
# ms/step, gptc's tokens/s, the speed ratios and MFU against the peak gptc measures in the same run
# (PaLM's FLOP convention, see gptc_model_flops_per_token).
#
# The peer: bench/lib.sh's peer_setup/peer_run (tcmalloc preloaded, Debian's OpenMP build of
# OpenBLAS, OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512, OPENBLAS_L2_SIZE unset,
# OMP_NUM_THREADS=THREADS with OMP_PROC_BIND=close OMP_PLACES=cores); torch_train_bench.py prints what
# it got and refuses to run without it. gptc runs with --threads THREADS --pin (one thread per core).
#
# llm.c (LLMC=/path/to/train_gpt2.c, with llm.c's llmc/ folder of headers beside it; fetched for the
# run, never part of this repository): the file and llmc/ are copied to a temp folder under /tmp and
# built there with gcc -Ofast -march=native -fopenmp -DOMP (the flags of llm.c's own Makefile). Its
# main() hard-codes B, T, 40 steps, a val-loss pass every 10 steps and sampling every 20, so the
# script patches the temp copy with sed: B and T set to 4 and the T being measured, STEPS+1 steps
# (step 0 first-touches its buffers and is left out of the median), no val loss, no sampling. It
# reads gpt2_124M.bin (here: a GPT-2 124M that gptc trains one step from random init and writes with
# `gptc export --format llmc`; the values do not matter for timing) and
# dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin (gptc's shards, which are llm.c's format,
# linked); without gpt2_tokenizer.bin it only warns. It runs with the same OMP_* settings as the peer.
#
# Settings, from the environment or NAME=VALUE arguments (arguments win): THREADS (2), STEPS (5),
# REF_STEPS (2), TS ("64 256"), LLMC (unset: no llm.c column), RUNS (1: each run measures gptc, then
# PyTorch and llm.c, in turn, a row each; the reference kernels run in the first only. With more, a
# "median" row per T gives each column's median over the runs, a ratio's the median of the runs' ratios:
# on a machine whose speed drifts over minutes, alternated runs say more than one long one).
#   e.g.  sh bench/train_e2e.sh STEPS=2 TS=64 LLMC=/tmp/llmc/train_gpt2.c
#         sh bench/train_e2e.sh RUNS=3 TS=64
set -e
for arg in "$@"; do
    case "$arg" in
        THREADS=*) THREADS=${arg#*=} ;;
        STEPS=*) STEPS=${arg#*=} ;;
        REF_STEPS=*) REF_STEPS=${arg#*=} ;;
        TS=*) TS=${arg#*=} ;;
        LLMC=*) LLMC=${arg#*=} ;;
        RUNS=*) RUNS=${arg#*=} ;;
        *) echo "train_e2e: unknown argument '$arg' (expected THREADS=, STEPS=, REF_STEPS=, TS=, LLMC=, RUNS=)" >&2; exit 2 ;;
    esac
done
case "$LLMC" in /*|'') ;; *) LLMC=$(pwd)/$LLMC ;; esac # before the cd below
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-5}
REF_STEPS=${REF_STEPS:-2}
TS=${TS:-64 256}
RUNS=${RUNS:-1}
case "$RUNS" in '' | *[!0-9]* | 0) echo "train_e2e: RUNS=$RUNS: expected a whole number of runs, 1 or more" >&2; exit 2 ;; esac
GPTC=build/gptc
[ -x "$GPTC" ] || { echo "train_e2e: $GPTC not found; run make first" >&2; exit 1; }
. bench/lib.sh
bench_data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

field() { # the number before word $2 on the last line of $1 matching $3
    awk -v w="$2" -v p="$3" 'index($0, p) { for (i = 2; i <= NF; i++) if ($i ~ "^" w) v = $(i - 1) } END { print v }' "$1"
}
gptc_train() { # log T steps [env...]: gptc pinned, without OMP_PROC_BIND/OMP_PLACES (see bench/lib.sh)
    gl=$1 gt=$2 gn=$3
    shift 3
    env -u OMP_PROC_BIND -u OMP_PLACES "$@" "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$gt" \
        --steps "$gn" --threads "$THREADS" --pin --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$gl" 2>&1 ||
        { cat "$gl" >&2; exit 1; }
}

peer_setup "$THREADS" >"$tmp/peer.txt" || exit 1

if [ -n "$LLMC" ]; then
    src=$(dirname "$LLMC")
    [ -f "$LLMC" ] || { echo "train_e2e: LLMC=$LLMC: no such file (a copy of llm.c's train_gpt2.c)" >&2; exit 1; }
    [ -f "$src/llmc/dataloader.h" ] || {
        echo "train_e2e: $src/llmc/ is missing: train_gpt2.c includes llm.c's llmc/utils.h, tokenizer.h, dataloader.h and rand.h; copy them beside it" >&2
        exit 1; }
    L=$tmp/llmc
    mkdir -p "$L/dev/data/tinyshakespeare"
    cp "$LLMC" "$L/train_gpt2.c"
    cp -R "$src/llmc" "$L/llmc"
    # B, T and the step count as macros; val loss and sampling off. Every pattern must match once.
    sed -i -e 's/int B = [0-9]*;/int B = LLMC_B;/' -e 's/int T = [0-9]*;/int T = LLMC_T;/' \
        -e 's/step <= 40;/step <= LLMC_STEPS;/' -e 's/if (step % 10 == 0) {/if (0) { \/\/ no val loss/' \
        -e 's/if (step > 0 && step % 20 == 0) {/if (0) { \/\/ no sampling/' "$L/train_gpt2.c"
    for p in 'int B = LLMC_B;' 'int T = LLMC_T;' 'step <= LLMC_STEPS;' '// no val loss' '// no sampling'; do
        [ "$(grep -cF "$p" "$L/train_gpt2.c")" = 1 ] || {
            echo "train_e2e: $LLMC is not the llm.c train_gpt2.c this script knows how to patch (no '$p' after sed)" >&2; exit 1; }
    done
    ln -s "$(pwd)/$DATA/train_000000.bin" "$L/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
    ln -s "$(pwd)/$DATA/val_000000.bin" "$L/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
    if ! { "$GPTC" train --model gpt2 --data "$DATA" --batch 1 --seq 8 --steps 1 --threads "$THREADS" --eval-every 0 \
        --eval-batches 1 --ckpt "$tmp/init" --quiet && "$GPTC" export --ckpt "$tmp/init" --format llmc \
        --out "$L/gpt2_124M.bin"; } >"$tmp/init.log" 2>&1; then
        cat "$tmp/init.log" >&2
        exit 1
    fi
    rm -rf "$tmp/init"
    LLMC_CC="gcc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result"
fi

echo "## Configurations"
echo
echo "- gptc: $GPTC train --threads $THREADS --pin (one thread per core; OMP_PROC_BIND/OMP_PLACES unset)"
echo "- PyTorch $(sed 's/^peer: //' "$tmp/peer.txt")"
[ -n "$LLMC" ] && echo "- llm.c: $LLMC_CC -DLLMC_B=4 -DLLMC_T=T -DLLMC_STEPS=$STEPS train_gpt2.c -lm (a patched copy of $LLMC under $tmp); OMP_NUM_THREADS=$THREADS OMP_PROC_BIND=close OMP_PLACES=cores; median of steps 1..$STEPS"
echo
h="| T | run | gptc ms/step | gptc ref ms/step | PyTorch ms/step |"
s="| ---: | ---: | ---: | ---: | ---: |"
[ -n "$LLMC" ] && h="$h llm.c ms/step |" && s="$s ---: |"
h="$h gptc tokens/s | gptc / PyTorch |"
s="$s ---: | ---: |"
[ -n "$LLMC" ] && h="$h gptc / llm.c |" && s="$s ---: |"
h="$h gptc / ref | gptc MFU | PyTorch MFU |"
s="$s ---: | ---: | ---: |"
[ -n "$LLMC" ] && h="$h llm.c MFU |" && s="$s ---: |"
echo "$h"
echo "$s"
row() { # T run "g r t l": one table row from the ms/step of gptc, ref, PyTorch, llm.c (l: - without llm.c)
    echo "$3" | awk -v T="$1" -v run="$2" -v f="$flops" -v p="$peak" '{
        g = $1; r = $2; t = $3; l = $4
        tok = 4 * T                                       # tokens per step
        mfu = 100 * tok * f / 1e9 / p                     # % of peak at 1 ms/step
        printf "| %d | %s | %.1f | %.1f | %.1f |", T, run, g, r, t
        if (l != "-") printf " %.1f |", l
        printf " %.1f | %.2fx |", tok / g * 1000, t / g
        if (l != "-") printf " %.2fx |", l / g
        printf " %.2fx | %.1f%% | %.1f%% |", r / g, mfu * 1000 / g, mfu * 1000 / t
        if (l != "-") printf " %.1f%% |", mfu * 1000 / l
        printf "\n" }'
}
for T in $TS; do
    if [ -n "$LLMC" ]; then
        $LLMC_CC -DLLMC_B=4 -DLLMC_T="$T" -DLLMC_STEPS="$STEPS" -o "$L/train_gpt2" "$L/train_gpt2.c" -lm 2>"$tmp/llmc-cc.log" ||
            { cat "$tmp/llmc-cc.log" >&2; exit 1; }
    fi
    : >"$tmp/runs-$T.txt"
    run=1
    while [ "$run" -le "$RUNS" ]; do
        gptc_train "$tmp/best.log" "$T" "$STEPS"
        [ "$run" = 1 ] && gptc_train "$tmp/ref.log" "$T" "$REF_STEPS" GPTC_KERNELS=ref
        peer_run /usr/bin/python3 bench/torch_train_bench.py --batch 4 --seq "$T" --threads "$THREADS" \
            --steps "$STEPS" >"$tmp/torch.log" 2>&1 || { cat "$tmp/torch.log" >&2; exit 1; }
        grep '^config:' "$tmp/torch.log" >"$tmp/torch-config-$T.txt"
        l=-
        if [ -n "$LLMC" ]; then
            (cd "$L" && OMP_NUM_THREADS=$THREADS OMP_PROC_BIND=close OMP_PLACES=cores ./train_gpt2) >"$tmp/llmc.log" 2>&1 ||
                { cat "$tmp/llmc.log" >&2; exit 1; }
            # "step N: train loss X (took Y ms)", step 0 left out
            l=$(awk '/^step [0-9]+: train loss/ && $2 != "0:" { print $7 }' "$tmp/llmc.log" | median)
            [ -n "$l" ] || { cat "$tmp/llmc.log" >&2; echo "train_e2e: no 'step N: ... (took Y ms)' line from llm.c" >&2; exit 1; }
        fi
        g=$(field "$tmp/best.log" "ms/step" "train: median")
        r=$(field "$tmp/ref.log" "ms/step" "train: median")
        t=$(field "$tmp/torch.log" "ms/step" "torch: median")
        flops=$(field "$tmp/best.log" "model" "FLOPs/token")
        peak=$(awk '/measured/ && /peak/ { for (i = 1; i <= NF; i++) if ($i == "peak") print $(i + 1) }' "$tmp/best.log")
        echo "$g $r $t $l" >>"$tmp/runs-$T.txt"
        row "$T" "$run" "$g $r $t $l"
        run=$((run + 1))
    done
    if [ "$RUNS" -gt 1 ]; then # medians of the runs; each ratio the median of the runs' ratios
        med() { column_median "$tmp/runs-$T.txt" "$1"; }
        ratio() { awk -v c="$1" '{ print $c / $1 }' "$tmp/runs-$T.txt" | median; }
        g=$(med 1) r=$(med 2) t=$(med 3) l=-
        [ -n "$LLMC" ] && l=$(med 4)
        # the speed ratios: the median of the runs' own (fields 8, or 9 and 10 with the llm.c columns)
        rl=-
        [ -n "$LLMC" ] && rl=$(ratio 4)
        row "$T" median "$g $r $t $l" | awk -v rt="$(ratio 3)" -v rl="$rl" 'BEGIN { FS = OFS = "|" } {
            if (rl == "-") $8 = sprintf(" %.2fx ", rt)
            else { $9 = sprintf(" %.2fx ", rt); $10 = sprintf(" %.2fx ", rl) }
            print }'
    fi
done
echo
echo "GPT-2 124M, B=4, fp32, $THREADS threads; each ms/step the median of $STEPS steps ($REF_STEPS for ref, in run 1);" \
    "ratios are speed ratios (the other's ms/step / gptc's); MFU against the fp32 peak gptc's FMA probe measures in the same run ($peak GFLOP/s)."
echo "What PyTorch got (bench/torch_train_bench.py), per T:"
for T in $TS; do echo "- T=$T: $(sed 's/^config: //' "$tmp/torch-config-$T.txt")"; done
