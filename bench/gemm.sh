#!/bin/sh
# gemm.sh — runs build/bench_gemm (every product of a GPT-2 step: gptc's GEMM against OpenBLAS called
# directly) with OpenBLAS in the peer's strongest configuration on this machine (bench/lib.sh's
# peer_setup: Debian's OpenMP build, OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512,
# OPENBLAS_L2_SIZE unset, OMP_NUM_THREADS=THREADS with OMP_PROC_BIND=close OMP_PLACES=cores, which pin
# gptc's threads in the same process too), printing that configuration first. Arguments go to
# bench_gemm (--bt, --threads, --product, --reps; see build/bench_gemm --help).
# Settings: THREADS (the cores this process may use).
#   e.g.  sh bench/gemm.sh --bt 1024 --threads 2 --reps 3
set -e
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
[ -x build/bench_gemm ] || { echo "gemm: build/bench_gemm not found; run make build/bench_gemm (or make bench)" >&2; exit 1; }
. bench/lib.sh
peer_setup "$THREADS"
peer_run build/bench_gemm "$@"
