#!/bin/sh
# tokenizer_vs_tiktoken.sh — GPT-2 BPE encoding speed of gptc's C tokenizer against tiktoken
# (OpenAI's Rust implementation compiled to WASM, run by node), one thread each, on tiny
# Shakespeare and on the mixed-Unicode benchmark file. Token counts must be equal.
#
#   sh bench/tokenizer_vs_tiktoken.sh        (from anywhere; needs build/bench_tokenizer)
#
# Exits 1 if build/bench_tokenizer is missing, a run fails, or the token counts differ.
set -e
cd "$(dirname "$0")/.."

REPEATS=5
BENCH_C=build/bench_tokenizer
REF=tools/tokenizer-ref
FILES="data/tinyshakespeare.txt tests/fixtures/tokenizer/corpus/mixed_unicode_bench.txt"

if [ ! -x "$BENCH_C" ]; then
    echo "tokenizer_vs_tiktoken: $BENCH_C is missing; run: make $BENCH_C" >&2
    exit 1
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    sh tools/setup.sh --node
fi
if [ ! -d "$REF/node_modules/tiktoken" ]; then
    echo "tokenizer_vs_tiktoken: installing the reference tokenizers (npm ci --prefix $REF)"
    npm ci --prefix "$REF" --no-audit --no-fund >/dev/null
fi

# num LINE LABEL: the number just before LABEL ("bytes", "tokens" or "MB/s") in a result line
#   "NAME: FILE: N bytes, M tokens, X MB/s (median of R runs, 1 thread)"
num() {
    printf '%s\n' "$1" | sed -n "s|.* \([0-9][0-9.]*\) $2[ ,].*|\1|p"
}

status=0
for f in $FILES; do
    gline=$("$BENCH_C" "$f" "$REPEATS")
    tline=$(node "$REF/bench_tiktoken.js" "$f" "$REPEATS")
    echo "$gline"
    echo "$tline"
    gbytes=$(num "$gline" bytes); gtok=$(num "$gline" tokens); gmbs=$(num "$gline" MB/s)
    tbytes=$(num "$tline" bytes); ttok=$(num "$tline" tokens); tmbs=$(num "$tline" MB/s)
    if [ -z "$gtok" ] || [ -z "$gmbs" ]; then
        echo "tokenizer_vs_tiktoken: cannot parse the output of $BENCH_C: '$gline'" >&2
        exit 1
    fi
    if [ -z "$ttok" ] || [ -z "$tmbs" ]; then
        echo "tokenizer_vs_tiktoken: cannot parse the output of bench_tiktoken.js: '$tline'" >&2
        exit 1
    fi
    ratio=$(awk -v g="$gmbs" -v t="$tmbs" 'BEGIN { if (t > 0) printf "%.2fx", g / t; else print "n/a" }')
    echo
    echo "== $f ($tbytes bytes)"
    printf '  %-14s %12s %12s\n' "" "MB/s" "tokens"
    printf '  %-14s %12s %12s\n' "gptc" "$gmbs" "$gtok"
    printf '  %-14s %12s %12s\n' "tiktoken" "$tmbs" "$ttok"
    printf '  %-14s %12s\n' "gptc/tiktoken" "$ratio"
    if [ "$gtok" != "$ttok" ] || [ "$gbytes" != "$tbytes" ]; then
        echo "  !!!!!!!! MISMATCH: gptc $gtok tokens / $gbytes bytes, tiktoken $ttok tokens / $tbytes bytes on $f !!!!!!!!"
        status=1
    fi
    echo
done
exit $status
