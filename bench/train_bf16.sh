#!/bin/sh
# train_bf16.sh — GPT-2 124M training throughput in bf16 mixed precision, side by side in one run:
# gptc --dtype fp32, gptc --dtype bf16, and PyTorch (bench/torch_train_bench.py, Debian's torch)
# in fp32 and under torch.autocast('cpu', dtype=torch.bfloat16) (its matmuls through oneDNN's
# AVX512_BF16 kernels), at B=4 and T in $TS (default 256) on $THREADS threads. Prints a Markdown
# table with tokens/s, the ratios, and MFU against the fp32 and bf16 peaks gptc measures in the
# same run (PaLM's FLOP convention, see gptc_model_flops_per_token). PyTorch runs in its strongest
# configuration (bench/lib.sh's peer_run: tcmalloc preloaded, Debian's OpenMP OpenBLAS for its fp32
# matmuls with OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512, OMP_NUM_THREADS=THREADS pinned
# one per core), gptc with --threads THREADS --pin; both configurations are printed first.
# Settings, from the environment or NAME=VALUE arguments (arguments win): THREADS (2), STEPS (5),
# TS ("256"), RUNS (1: each run measures all four in turn, a row each; with more, a "median" row per T
# gives each column's median over the runs, a ratio's the median of the runs' ratios — on a machine whose
# speed drifts over minutes a ratio of two runs minutes apart says more about the drift).
set -e
for arg in "$@"; do
    case "$arg" in
        THREADS=*) THREADS=${arg#*=} ;;
        STEPS=*) STEPS=${arg#*=} ;;
        TS=*) TS=${arg#*=} ;;
        RUNS=*) RUNS=${arg#*=} ;;
        *) echo "train_bf16: unknown argument '$arg' (expected THREADS=, STEPS=, TS=, RUNS=)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-5}
TS=${TS:-256}
RUNS=${RUNS:-1}
GPTC=build/gptc
[ -x "$GPTC" ] || { echo "train_bf16: $GPTC not found; run make first" >&2; exit 1; }
. bench/lib.sh
bench_data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_bf16.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

field() { # the number before word $2 on the last line of $1 matching $3
    awk -v w="$2" -v p="$3" 'index($0, p) { for (i = 2; i <= NF; i++) if ($i ~ "^" w) v = $(i - 1) } END { print v }' "$1"
}
peak() { # the number after "peak" on the summary line of $1
    awk '/measured/ && /peak/ { for (i = 1; i < NF; i++) if ($i == "peak") v = $(i + 1) } END { print v }' "$1"
}
gptc_run() { # dtype T log: pinned, without OMP_PROC_BIND/OMP_PLACES (see bench/lib.sh)
    env -u OMP_PROC_BIND -u OMP_PLACES "$GPTC" train --model gpt2 --data "$DATA" --batch 4 --seq "$2" --steps "$STEPS" \
        --threads "$THREADS" --pin --dtype "$1" --eval-every 0 --eval-batches 1 --lr 1e-4 --quiet >"$3" 2>&1 ||
        { cat "$3" >&2; exit 1; }
}
torch_run() { # dtype T log
    peer_run /usr/bin/python3 bench/torch_train_bench.py --batch 4 --seq "$2" --threads "$THREADS" \
        --steps "$STEPS" --dtype "$1" >"$3" 2>&1 || { cat "$3" >&2; exit 1; }
}

row() { # T run "g32 g16 t32 t16 ratio ratio mfu mfu mfu": one table row
    echo "$3" | awk -v T="$1" -v run="$2" '{
        printf "| %d | %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.1f%% | %.1f%% | %.1f%% |\n", T, run, $1, $2, $3,
               $4, $5, $6, $7, $8, $9 }'
}

peer_setup "$THREADS" >"$tmp/peer.txt" || exit 1
echo "- gptc: $GPTC train --threads $THREADS --pin (one thread per core; OMP_PROC_BIND/OMP_PLACES unset)"
echo "- PyTorch $(sed 's/^peer: //' "$tmp/peer.txt")"
echo

echo "| T | run | gptc fp32 tokens/s | gptc bf16 tokens/s | PyTorch fp32 tokens/s | PyTorch bf16 tokens/s | gptc bf16 / gptc fp32 | gptc bf16 / PyTorch bf16 | gptc bf16 MFU (bf16 peak) | PyTorch bf16 MFU (bf16 peak) | gptc fp32 MFU (fp32 peak) |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for T in $TS; do
    run=1
    while [ "$run" -le "$RUNS" ]; do
        gptc_run fp32 "$T" "$tmp/g32.log"
        gptc_run bf16 "$T" "$tmp/g16.log"
        torch_run fp32 "$T" "$tmp/t32.log"
        torch_run bf16 "$T" "$tmp/t16.log"
        grep '^config:' "$tmp/t16.log" >"$tmp/torch-config-$T.txt"
        g32=$(field "$tmp/g32.log" "tokens/s" "train: median")
        g16=$(field "$tmp/g16.log" "tokens/s" "train: median")
        t32=$(field "$tmp/t32.log" "tokens/s" "torch: median")
        t16=$(field "$tmp/t16.log" "tokens/s" "torch: median")
        flops=$(field "$tmp/g32.log" "model" "FLOPs/token")
        p32=$(peak "$tmp/g32.log")
        p16=$(peak "$tmp/g16.log")
        awk -v g32="$g32" -v g16="$g16" -v t32="$t32" -v t16="$t16" -v f="$flops" -v p32="$p32" -v p16="$p16" 'BEGIN {
            print g32, g16, t32, t16, g16 / g32, g16 / t16, 100 * g16 * f / 1e9 / p16, 100 * t16 * f / 1e9 / p16,
                  100 * g32 * f / 1e9 / p32 }' >>"$tmp/runs-$T.txt"
        row "$T" "$run" "$(tail -n 1 "$tmp/runs-$T.txt")"
        run=$((run + 1))
    done
    if [ "$RUNS" -gt 1 ]; then
        m=""
        for c in 1 2 3 4 5 6 7 8 9; do m="$m $(column_median "$tmp/runs-$T.txt" "$c")"; done
        row "$T" median "$m"
    fi
done
echo
echo "B=4, $THREADS threads; median step of $STEPS steps; peaks measured by gptc's FMA and vdpbf16ps probes in the same run."
echo "What PyTorch got (bench/torch_train_bench.py, its last bf16 run), per T:"
for T in $TS; do echo "- T=$T: $(sed 's/^config: //' "$tmp/torch-config-$T.txt")"; done
