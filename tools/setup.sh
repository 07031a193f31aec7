#!/bin/sh
# setup.sh — installs the Debian packages gptc needs when they are missing: apt-get when run as
# root, otherwise it prints the exact command and fails. Open MPI is part of the base set: the
# data-parallel build and its mpirun tests need it (`make MPI=0` builds without); iproute2 makes the
# network namespaces of tests/mpi/two_hosts.sh. `--torch` adds what `make fixtures` and
# the PyTorch benchmark need; `--bench` what the benchmarks need: OpenBLAS (both builds; the OpenMP
# one is the peer bench/lib.sh configures), PyTorch, and libtcmalloc-minimal4, the allocator bench/lib.sh
# preloads into PyTorch (its strongest configuration); `--node` what the tokenizer fixtures and the tiktoken benchmark need;
# `--browser` Debian's chromium, for the headless screenshot of `gptc report`'s page in the tests
# (about 20 s and 130 MB to download, 440 MB on disk; `make test` asks for it and goes on without it).
# `--fuzz` what `make fuzz` needs: clang-14, libclang-rt-14-dev (on Debian 12 it ships libFuzzer as
# libclang_rt.fuzzer*.a beside the sanitizer runtimes, which -fsanitize=fuzzer links; the separate
# libfuzzer-14-dev is the stand-alone libFuzzer.a, not needed) and libomp-14-dev (clang's -fopenmp).
# `--aarch64` what `make test-aarch64` needs: the cross compiler, qemu's user-mode emulator, and the
# arm64 builds of PCRE2, cJSON and libgomp (Debian multiarch: `dpkg --add-architecture arm64` first,
# which changes nothing for the amd64 packages). The emulated programs run on these arm64 libraries
# and their libc6:arm64 (/lib/aarch64-linux-gnu), as on an arm64 Debian; not on the cross
# toolchain's copies in /usr/aarch64-linux-gnu, whose ld.so is an older build than that libc and
# hangs the first thread the two start together.
set -e
need="gcc make libc6-dev libcjson-dev libpcre2-dev openmpi-bin libopenmpi-dev iproute2"
[ "$1" = "--torch" ] && need="$need python3-torch python3-numpy libopenblas0-pthread"
[ "$1" = "--browser" ] && need="$need chromium"
[ "$1" = "--fuzz" ] && need="$need clang-14 libclang-rt-14-dev libomp-14-dev"
[ "$1" = "--aarch64" ] && need="$need gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static libpcre2-dev:arm64 libcjson-dev:arm64 libgomp1:arm64"
[ "$1" = "--bench" ] && need="$need libopenblas-dev libopenblas0-openmp libopenblas0-pthread python3-torch python3-numpy libtcmalloc-minimal4"
# node and npm may come from another packaging of Node.js; only install Debian's when absent
if [ "$1" = "--node" ] && ! { command -v node && command -v npm; } >/dev/null; then need="$need nodejs npm"; fi
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
# apt-get knows no :arm64 package until dpkg takes that architecture
addarch=""
case "$missing" in *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || addarch=1 ;; esac
if [ "$(id -u)" = 0 ]; then
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    [ -n "$addarch" ] && dpkg --add-architecture arm64
    apt-get update -q >/dev/null
    apt-get install -y -q $missing >/dev/null
else
    echo "setup: missing Debian packages:$missing" >&2
    if [ -n "$addarch" ]; then
        echo "setup: run: sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install -y$missing" >&2
    else
        echo "setup: run: sudo apt-get install -y$missing" >&2
    fi
    exit 1
fi
