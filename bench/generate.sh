#!/bin/sh
# generate.sh — generation speed of GPT-2 124M, gptc beside PyTorch, on the same shapes: a prompt of
# PROMPT (512) GPT-2 tokens (the start of tiny Shakespeare, cut to that many tokens) prefilled, then
# TOKENS (128) new tokens per sample, greedy (--temperature 0: the draw costs next to nothing on
# either side) or with TEMP=T a draw from the top-p nucleus (TOP_P, default 0.95 then: gptc sample's
# defaults are 0.8 and 0.95) on both sides, fp32 and bf16, --samples 1 and 4 (generated together), on
# THREADS (2) threads.
#   gptc: `gptc sample --pin --json` on a checkpoint of random weights (`gptc train --model gpt2 --steps 1`,
#     made once under build/bench-generate; weights do not change the speed); its speed report gives
#     prefill tokens/s and GFLOP/s against the FMA peak `gptc info` measures (cached in peak.json),
#     decode tokens/s, ms per step, and the bandwidth a step reached against the triad's: the best
#     `gptc info` has measured (cached), and one measured right after that run (`--triad-now`; a shared
#     host's memory bandwidth swings by half between minutes).
#   PyTorch: bench/torch_generate_bench.py (HF-style incremental decoding with a KV cache, the model of
#     tools/torch_gpt2.py) in its strongest configuration (bench/lib.sh's peer_run: tcmalloc, Debian's
#     OpenMP OpenBLAS with OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512, pinned threads).
# Each configuration runs REPS (3) times, gptc and PyTorch alternating, and the table shows the medians
# (a shared host's speed swings by 2x between runs; the range of gptc's decode share of the bound is
# printed beside it). Prints both configurations, then one table. Goals (reported, not enforced): decode
# at >= 80% of the bandwidth bound, prefill at >= 60% of the peak. Settings, from the environment or
# NAME=VALUE arguments: THREADS (2), PROMPT (512), TOKENS (128), SAMPLES ("1 4"), DTYPES ("fp32 bf16"),
# REPS (3), TEMP (0), TOP_P (0.95 with TEMP, else 1).
set -e
for arg in "$@"; do
    case "$arg" in
        THREADS=*) THREADS=${arg#*=} ;;
        PROMPT=*) PROMPT=${arg#*=} ;;
        TOKENS=*) TOKENS=${arg#*=} ;;
        SAMPLES=*) SAMPLES=${arg#*=} ;;
        DTYPES=*) DTYPES=${arg#*=} ;;
        REPS=*) REPS=${arg#*=} ;;
        TEMP=*) TEMP=${arg#*=} ;;
        TOP_P=*) TOP_P=${arg#*=} ;;
        *) echo "generate: unknown argument '$arg' (expected THREADS=, PROMPT=, TOKENS=, SAMPLES=, DTYPES=, REPS=, TEMP=, TOP_P=)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-512}
TOKENS=${TOKENS:-128}
SAMPLES=${SAMPLES:-1 4}
DTYPES=${DTYPES:-fp32 bf16}
REPS=${REPS:-3}
TEMP=${TEMP:-0}
case "$TEMP" in 0 | 0.0) TOP_P=${TOP_P:-1} ;; *) TOP_P=${TOP_P:-0.95} ;; esac
case "$REPS" in '' | *[!0-9]* | 0) echo "generate: REPS=$REPS is not a positive whole number" >&2; exit 2 ;; esac
case "$TEMP$TOP_P" in *[!0-9.]*) echo "generate: TEMP=$TEMP TOP_P=$TOP_P: give plain decimal numbers" >&2; exit 2 ;; esac
GPTC=build/gptc
[ -x "$GPTC" ] || { echo "generate: $GPTC not found; run make first" >&2; exit 1; }
. bench/lib.sh
bench_data
CKPT=build/bench-generate/gpt2
if [ ! -d "$CKPT" ]; then
    echo "making a GPT-2 124M checkpoint of random weights in $CKPT (gptc train --model gpt2 --steps 1)"
    $GPTC train --model gpt2 --data "$DATA" --ckpt "$CKPT" --steps 1 --batch 1 --seq 64 --threads "$THREADS" >/dev/null
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/generate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# the prompt: the longest start of tiny Shakespeare (cut after a space) of at most PROMPT tokens
count() { $GPTC tokenize --ids-only - <"$1" | wc -w; }
lo=1 hi=$((PROMPT * 8))
while [ $lo -lt $hi ]; do
    mid=$(((lo + hi + 1) / 2))
    head -c "$mid" data/tinyshakespeare.txt >"$tmp/p"
    if [ "$(count "$tmp/p")" -le "$PROMPT" ]; then lo=$mid; else hi=$((mid - 1)); fi
done
head -c "$lo" data/tinyshakespeare.txt >"$tmp/prompt"
NP=$(count "$tmp/prompt")
PTEXT=$(cat "$tmp/prompt")

peer_setup "$THREADS"
echo "gptc: $GPTC sample --threads $THREADS --pin --temperature $TEMP --top-p $TOP_P --tokens $TOKENS, prompt of $NP tokens, checkpoint $CKPT"
echo "config: GPT-2 124M, prompt $NP tokens, $TOKENS new tokens per sample, $THREADS threads, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"

j() { # the number of JSON field $2 in file $1
    sed -n "s/.*\"$2\": \\([0-9.]*\\).*/\\1/p" "$1"
}
med() { # the median of JSON field $1 over this configuration's gptc runs
    for f in "$tmp"/g.*.json; do j "$f" "$1"; done | median
}
range() { # the lowest and highest of JSON field $1 over this configuration's gptc runs, as LO-HI
    for f in "$tmp"/g.*.json; do j "$f" "$1"; done | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'
}
tmed() { # the median of the figure sed expression $1 picks from this configuration's torch lines
    for f in "$tmp"/t.*.txt; do grep '^torch:' "$f" | sed -n "$1"; done | median
}
rows=""
for dt in $DTYPES; do
    for s in $SAMPLES; do
        rm -f "$tmp"/g.*.json "$tmp"/t.*.txt
        r=1
        while [ $r -le "$REPS" ]; do
            $GPTC sample --ckpt "$CKPT" --prompt "$PTEXT" --tokens "$TOKENS" --samples "$s" --dtype "$dt" --temperature "$TEMP" \
                --top-p "$TOP_P" --threads "$THREADS" --pin --triad-now --json >/dev/null 2>"$tmp/g.$r.json"
            peer_run /usr/bin/python3 bench/torch_generate_bench.py --prompt-tokens "$NP" --tokens "$TOKENS" --samples "$s" \
                --dtype "$dt" --threads "$THREADS" --temperature "$TEMP" --top-p "$TOP_P" >"$tmp/t.$r.txt" 2>&1 || { cat "$tmp/t.$r.txt" >&2; exit 1; }
            r=$((r + 1))
        done
        [ -n "$rows" ] || sed -n '/^blas:/p; /^config:/p' "$tmp/t.1.txt"
        tpre=$(tmed 's/.*tokens [0-9.]* s, \([0-9.]*\) tokens\/s | decode.*/\1/p')
        tdec=$(tmed 's/.*decode.* s, \([0-9.]*\) tokens\/s, .*/\1/p')
        tms=$(tmed 's/.*, \([0-9.]*\) ms\/step.*/\1/p')
        g1="$tmp/g.1.json"
        bw=$(range bandwidth_pct)
        now=$(range triad_now_gbps)
        rows="$rows
| $dt | $s | $(med prefill_tokens_per_s) | $tpre | $(med prefill_gflops) ($(med prefill_peak_pct)% of $(j "$g1" peak_gflops)) | $(med decode_tokens_per_s) | $tdec | $(med ms_per_step) | $tms | $(j "$g1" bound_ms_per_step) | $(med decode_gbps) ($(med bandwidth_pct)% of $(j "$g1" triad_gbps); runs $bw%) | $(med bandwidth_now_pct)% (triad $now GB/s) |"
    done
done
echo
echo "| dtype | samples | gptc prefill tok/s | torch prefill tok/s | gptc prefill GFLOP/s (% of peak) | gptc decode tok/s | torch decode tok/s | gptc ms/step | torch ms/step | bound ms/step (weights / triad) | gptc GB/s (% of the cached triad) | % of the triad measured after each run |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |$rows"
echo
echo "medians of $REPS runs per row (gptc and torch alternating); $([ "$TEMP" = 0 ] && echo greedy || echo "temperature $TEMP, top-p $TOP_P on both sides"); decode tok/s counts every sample's tokens; a step advances all samples by one; bound = weight bytes per step / triad bandwidth (KV cache reads not counted; the cached triad is the best gptc info has measured on this machine, the last column's is measured by gptc sample --triad-now right after each run, its range shown); bf16: gptc reads a bf16 copy of the weights and keeps a bf16 KV cache (fp32 activations), torch runs the whole model in bfloat16"
