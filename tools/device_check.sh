#!/bin/sh
# tools/device_check.sh — the CUDA backend's checks on a machine with a GPU (an H200), in one command:
#   sh tools/device_check.sh [PATH_TO_LLM_C]
# 1. builds with CUDA (make -j16 CUDA=1, into build-cuda/ so that no CPU object of build/ is reused);
# 2. lists the GPUs (gptc info) and runs the GPU tests (build-cuda/gptc_tests cuda: tests/test_cuda.c);
# 3. trains GPT-2 124M in bf16 on --device cuda for a few steps at T=1024 (tokens/s and MFU against the
#    H200's datasheet bf16 peak, from gptc's own log line);
# 4. trains gpt2-1.3b (bf16, T=1024) for a few steps;
# 5. optionally builds llm.c's train_gpt2cu from PATH_TO_LLM_C under /tmp (never in this tree) and runs
#    it for a few steps on the same token shards, for comparison.
# Every stage runs under `timeout`, the limits adding up to under 8 minutes (llm.c only runs in what is
# left), and prints PASS or FAIL; the
# summary at the end repeats them; the exit status is 1 when a required stage failed.
set -u
cd "$(dirname "$0")/.." || exit 1
LLMC=${1:-}
OUT=${OUT:-/tmp/gptc_device_check}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=0
T0=$(date +%s)

# stage NAME LIMIT_SECONDS REQUIRED(1|0) COMMAND...: runs COMMAND under timeout, its output to the
# terminal and to $OUT/NAME.log
stage() {
    name=$1 limit=$2 required=$3
    shift 3
    echo "=== $name (limit ${limit}s)"
    timeout -k 3 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    cat "$OUT/$name.log" | tail -n 40
    if [ $rc -eq 0 ]; then
        echo "PASS $name" | tee -a "$SUMMARY"
    else
        why="rc $rc"
        [ $rc -eq 124 ] && why="timed out after ${limit}s"
        if [ "$required" = 1 ]; then
            FAILED=1
            echo "FAIL $name ($why)" | tee -a "$SUMMARY"
        else
            echo "FAIL (optional) $name ($why)" | tee -a "$SUMMARY"
        fi
    fi
    return $rc
}

stage nvidia-smi 15 0 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv
stage build 150 1 make -j16 CUDA=1 BUILD=build-cuda build-cuda/gptc build-cuda/gptc_tests || {
    echo "the CUDA build failed: nothing else can run"
    cat "$SUMMARY"
    exit 1
}
stage info 25 1 sh -c 'build-cuda/gptc info | grep -A4 "^gpus"'
stage gpu-tests 100 1 build-cuda/gptc_tests cuda

# token shards for the runs (byte tokens of tiny Shakespeare: the shard layout llm.c reads too)
DATA="$OUT/shakespeare"
[ -f "$DATA/meta.json" ] || build-cuda/gptc prepare --tokenizer byte data/tinyshakespeare.txt --out "$DATA" >/dev/null 2>&1
# the train shard alone, without its meta.json: the GPT-2 presets' vocabulary (50257) then trains on the
# byte ids (a prepared folder names vocab 257, which the presets refuse); no val split, no evaluation
RAW="$OUT/raw"
mkdir -p "$RAW"
cp "$(ls "$DATA"/*train*.bin | head -n 1)" "$RAW/train.bin"

# a run's last step line and summary: tokens/s and MFU as gptc logs them
figures() { grep -E "tok/s|MFU" "$OUT/$1.log" | tail -n 3; }

stage gpt2-124m-bf16 75 1 build-cuda/gptc train --model gpt2 --data "$RAW/train.bin" --device cuda --dtype bf16 \
    --seq 1024 --batch 16 --steps 8 --warmup 2 --eval-every 0 --ckpt-every 0 --threads 4
figures gpt2-124m-bf16
stage gpt2-1.3b-bf16 85 1 build-cuda/gptc train --model gpt2-1.3b --data "$RAW/train.bin" --device cuda --dtype bf16 \
    --seq 1024 --batch 4 --steps 3 --warmup 1 --eval-every 0 --ckpt-every 0 --threads 4
figures gpt2-1.3b-bf16

# llm.c only with the time left: the required stages' limits add up to 450 s, the budget is 470 s
LEFT=$((470 - ($(date +%s) - T0)))
if [ -n "$LLMC" ] && [ "$LEFT" -lt 100 ]; then
    echo "SKIP llm.c: ${LEFT}s left of the 8 minutes" | tee -a "$SUMMARY"
elif [ -n "$LLMC" ]; then
    rm -rf /tmp/gptc_llmc && cp -r "$LLMC" /tmp/gptc_llmc
    stage llmc-build $((LEFT / 2)) 0 make -C /tmp/gptc_llmc train_gpt2cu USE_CUDNN=0
    [ -x /tmp/gptc_llmc/train_gpt2cu ] && stage llmc-124m $((LEFT / 2 - 5)) 0 sh -c "cd /tmp/gptc_llmc && ./train_gpt2cu \
        -i '$RAW/train.bin' -j '$RAW/train.bin' -e d12 -b 16 -t 1024 -x 8 -v 0 -s 0 -o /tmp/gptc_llmc/out"
fi

echo "=== summary ($(($(date +%s) - T0)) s; logs in $OUT)"
cat "$SUMMARY"
exit $FAILED
