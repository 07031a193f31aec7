# lib.sh — shared by the bench scripts (sourced from the repository root): the GPT-2-tokenized tiny
# Shakespeare they train on (bench_data makes it when missing), the median of numbers read one per
# line, and the peers' strongest configuration (peer_setup, peer_run).
DATA=build/data/shakespeare-gpt2
bench_data() { [ -f "$DATA/meta.json" ] || build/gptc prepare --tokenizer gpt2 data/tinyshakespeare.txt --out "$DATA" >/dev/null; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# column_median FILE C — the median of column C over FILE's lines (a bench's runs, one line each)
column_median() { awk -v c="$2" '{ print $c }' "$1" | median; }

# peer_setup THREADS — chooses the strongest configuration of PyTorch and OpenBLAS on this machine,
# for peer_run to apply, and prints it as one line ("peer: ..."); returns 1 with one line naming the
# setup command when a piece is missing. The configuration:
#   LD_PRELOAD=libtcmalloc_minimal.so.4  Debian's libtcmalloc-minimal4. With glibc's malloc PyTorch
#       returns its activations to the kernel and re-faults them every step (on small VMs that alone
#       makes a step several times slower, mostly system time); tcmalloc keeps them.
#   LD_LIBRARY_PATH=.../openblas-openmp  Debian's OpenMP build of OpenBLAS (libopenblas0-openmp), so
#       PyTorch's libblas.so.3 and bench_gemm's libopenblas.so.0 share one OpenMP runtime with their
#       callers; the pthreads build the alternatives system picks by default runs its own threads.
#   OPENBLAS_CORETYPE=SkylakeX where /proc/cpuinfo has avx512f (its AVX-512 kernels; this overrides
#       an OPENBLAS_CORETYPE=Haswell the environment may set, and OpenBLAS 0.3.21's own detection,
#       which can take a CPU newer than itself for Prescott: it did a Xeon of family 6, model 207),
#       otherwise unset so that OpenBLAS detects the CPU; OPENBLAS_L2_SIZE unset (OpenBLAS reads the cache size itself).
#   OMP_NUM_THREADS=THREADS OMP_PROC_BIND=close OMP_PLACES=cores  one thread per core, pinned; gptc
#       gets the same with --pin (the scripts pass it; it binds each thread in-process, one per
#       physical core, and must not be combined with OMP_PROC_BIND, which binds the main thread to
#       one core before gptc reads its affinity).
peer_setup() {
    PEER_THREADS=$1
    PEER_TCMALLOC=""
    for f in /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
        $(ldconfig -p 2>/dev/null | awk '$1 == "libtcmalloc_minimal.so.4" { print $NF }'); do
        if [ -f "$f" ]; then PEER_TCMALLOC=$f; break; fi
    done
    if [ -z "$PEER_TCMALLOC" ]; then
        echo "${0##*/}: libtcmalloc_minimal.so.4 not found (Debian's libtcmalloc-minimal4); run sh tools/setup.sh --bench" >&2
        return 1
    fi
    PEER_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp
    if [ ! -f "$PEER_BLAS/libblas.so.3" ] || [ ! -f "$PEER_BLAS/libopenblas.so.0" ]; then
        echo "${0##*/}: $PEER_BLAS is missing (Debian's libopenblas0-openmp); run sh tools/setup.sh --bench" >&2
        return 1
    fi
    PEER_CORETYPE=""
    grep -qw avx512f /proc/cpuinfo 2>/dev/null && PEER_CORETYPE=SkylakeX
    echo "peer: LD_PRELOAD=$PEER_TCMALLOC LD_LIBRARY_PATH=$PEER_BLAS" \
        "OPENBLAS_CORETYPE=${PEER_CORETYPE:-(unset: no avx512f, OpenBLAS detects)} OPENBLAS_L2_SIZE=(unset)" \
        "OMP_NUM_THREADS=$PEER_THREADS OMP_PROC_BIND=close OMP_PLACES=cores"
}

# peer_run COMMAND [ARG...] — runs COMMAND in the configuration peer_setup chose.
peer_run() {
    [ -n "$PEER_CORETYPE" ] && set -- "OPENBLAS_CORETYPE=$PEER_CORETYPE" "$@"
    env -u OPENBLAS_L2_SIZE -u OPENBLAS_CORETYPE "LD_PRELOAD=$PEER_TCMALLOC" "LD_LIBRARY_PATH=$PEER_BLAS" \
        "OMP_NUM_THREADS=$PEER_THREADS" OMP_PROC_BIND=close OMP_PLACES=cores "$@"
}
