#!/bin/sh
# setup.sh — installs the Debian packages gptc needs when they are missing: apt-get when run as
# root, otherwise it prints the exact command and fails. Open MPI is part of the base set: the
# data-parallel build and its mpirun tests need it (`make MPI=0` builds without); iproute2 makes the
# network namespaces of tests/mpi/two_hosts.sh. `--torch` adds what `make fixtures` and
# the PyTorch benchmark need; `--bench` what the kernel benchmarks link against (OpenBLAS); `--node` what the tokenizer fixtures and the tiktoken benchmark need;
# `--browser` Debian's chromium, for the headless screenshot of `gptc report`'s page in the tests
# (about 20 s and 130 MB to download, 440 MB on disk; `make test` asks for it and goes on without it).
# `--fuzz` what `make fuzz` needs: clang-14, libclang-rt-14-dev (on Debian 12 it ships libFuzzer as
# libclang_rt.fuzzer*.a beside the sanitizer runtimes, which -fsanitize=fuzzer links; the separate
# libfuzzer-14-dev is the stand-alone libFuzzer.a, not needed) and libomp-14-dev (clang's -fopenmp).
set -e
need="gcc make libc6-dev libcjson-dev libpcre2-dev openmpi-bin libopenmpi-dev iproute2"
[ "$1" = "--torch" ] && need="$need python3-torch python3-numpy libopenblas0-pthread"
[ "$1" = "--browser" ] && need="$need chromium"
[ "$1" = "--fuzz" ] && need="$need clang-14 libclang-rt-14-dev libomp-14-dev"
[ "$1" = "--bench" ] && need="$need libopenblas-dev libopenblas0-openmp libopenblas0-pthread python3-torch python3-numpy"
# node and npm may come from another packaging of Node.js; only install Debian's when absent
if [ "$1" = "--node" ] && ! { command -v node && command -v npm; } >/dev/null; then need="$need nodejs npm"; fi
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q $missing >/dev/null
else
    echo "setup: missing Debian packages:$missing" >&2
    echo "setup: run: sudo apt-get install -y$missing" >&2
    exit 1
fi
