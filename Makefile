# gptc — build, train, test. `make train` and `make test` set up what is missing first.
CC      ?= gcc
OPT     ?= -O3
CFLAGS  ?= $(OPT) -g -fno-math-errno
EXTRA_CFLAGS ?=
CFLAGS  += $(EXTRA_CFLAGS) -std=c11 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -fopenmp -D_GNU_SOURCE -Iinclude -Isrc -MMD -MP
LDLIBS  := -lpcre2-8 -lcjson -lm -fopenmp
BUILD   := build

# Data parallel over MPI when mpicc is found (`make MPI=0` builds the one-process backend instead);
# only src/dist/dist_mpi.c sees MPI's headers, and the link adds MPI's libraries.
MPI ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile) -DGPTC_MPI
LDLIBS     += $(shell mpicc --showme:link)
DIST_SKIP  := src/dist/dist_single.c
else
DIST_SKIP  := src/dist/dist_mpi.c
endif

# The x86 kernels (src/kernels/x86_*) are built only for an x86 target; elsewhere (make test-aarch64)
# the library has the reference kernels, and CPUID reports no x86 feature (src/core/cpu.c).
CC_ARCH := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
ifneq ($(filter x86_64 i386 i486 i586 i686,$(CC_ARCH)),)
ISA_SKIP :=
else
ISA_SKIP := $(shell find src/kernels/x86_avx2 src/kernels/x86_avx512 src/kernels/x86_amx -name '*.c')
endif

# The CUDA backend (src/backend/cuda/*.cu, backend/cuda.h) with `make CUDA=1`: nvcc for sm_90 (H100/H200),
# linked with cudart and cuBLASLt, -DGPTC_CUDA; the default CUDA=0 compiles src/backend/cuda_absent.c
# instead (no devices, "built without CUDA") and needs nothing of CUDA. `make cuda-check` builds the
# CUDA=1 programs into build-cuda/ (a compile-and-link check; running them needs a GPU).
CUDA      ?= 0
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(or $(shell command -v nvcc 2>/dev/null),$(CUDA_HOME)/bin/nvcc)
CUDA_ARCH ?= sm_90
ifeq ($(CUDA),1)
CUDA_SKIP := src/backend/cuda_absent.c
CUDA_SRC  := $(sort $(wildcard src/backend/cuda/*.cu))
CFLAGS    += -DGPTC_CUDA
LDLIBS    += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
NVCCFLAGS := -O3 -g -arch=$(CUDA_ARCH) -std=c++17 -DGPTC_CUDA -Iinclude -Isrc -MMD -MP \
             -Xcompiler -Wall,-Wno-unused-parameter,-Wno-unused-function
else
CUDA_SKIP :=
CUDA_SRC  :=
endif

LIB_SRC  := $(sort $(filter-out $(DIST_SKIP) $(ISA_SKIP) $(CUDA_SKIP),$(shell find src -name '*.c' -not -path 'src/cli/*')))
CLI_SRC  := $(sort $(filter-out src/cli/main.c,$(wildcard src/cli/*.c)))
TEST_SRC := $(sort $(wildcard tests/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CUDA_SRC:%.cu=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

# The bundled default run: tiny Shakespeare, byte tokens, the `small-cpu` model.
TRAIN_ARGS ?= --sample-every 800
RUN_DIR    ?= runs/shakespeare

.PHONY: all setup cuda-check train test test-aarch64 test-sanitize fuzz fuzz-build fuzz-regress fuzz-seeds fixtures bench clean examples
all: $(BUILD)/gptc

setup:
	@sh tools/setup.sh

# ISA flags apply only to that ISA's files, so one binary runs on any x86-64.
AVX2_FLAGS   := -mavx2 -mfma
AVX512_FLAGS := -mavx2 -mfma -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
AMX_FLAGS    := $(AVX512_FLAGS) -mamx-tile -mamx-bf16
$(BUILD)/src/kernels/x86_avx2/%.o: ISA_FLAGS := $(AVX2_FLAGS)
$(BUILD)/src/kernels/x86_avx512/%.o: ISA_FLAGS := $(AVX512_FLAGS)
$(BUILD)/src/kernels/x86_amx/%.o: ISA_FLAGS := $(AMX_FLAGS)
$(BUILD)/src/dist/dist_mpi.o: ISA_FLAGS := $(MPI_CFLAGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_FLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# The CUDA build as a compile-and-link check (CI runs it where nvcc exists): build-cuda/gptc and its tests.
cuda-check:
	@$(MAKE) --no-print-directory CUDA=1 BUILD=build-cuda build-cuda/gptc build-cuda/gptc_tests

# A stamp of the CUDA setting, so that switching CUDA=0/1 in one build folder rebuilds the archive
# (its member list differs: cuda_absent.o or the .cu objects).
CUDA_STAMP := $(BUILD)/.cuda$(CUDA)
$(CUDA_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.cuda0 $(BUILD)/.cuda1
	@touch $@

$(BUILD)/libgptc.a: $(LIB_OBJ) $(CUDA_STAMP)
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(BUILD)/libgptc_cli.a: $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/gptc: $(BUILD)/src/cli/main.o $(BUILD)/libgptc_cli.a $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Programs that embed libgptc (examples/ but the plugin), built by `make test`, which runs them.
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(filter-out examples/op_plugin_%,$(wildcard examples/*.c)))
# The example operator plugin (examples/op_plugin_gelu.c) as gptc users build one: only the public
# header, -shared -fPIC; its -D variants are the plugins tests/test_plugin.c expects gptc to refuse.
PLUGIN_FLAGS := $(OPT) -g -fno-math-errno -std=c11 -Wall -Wextra -fopenmp -fPIC -shared -Iinclude
PLUGIN_VARIANTS := wrong:WRONG bad_abi:BAD_ABI unknown_op:UNKNOWN_OP contract:CONTRACT no_entry:NO_ENTRY
EXAMPLE_SO := $(BUILD)/examples/op_plugin_gelu.so \
              $(foreach v,$(PLUGIN_VARIANTS),$(BUILD)/examples/op_plugin_gelu_$(firstword $(subst :, ,$(v))).so)
examples: $(EXAMPLE_SO) $(EXAMPLES)

$(BUILD)/examples/op_plugin_gelu.so: examples/op_plugin_gelu.c include/gptc_op_plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_FLAGS) $< -o $@

$(BUILD)/examples/op_plugin_gelu_%.so: examples/op_plugin_gelu.c include/gptc_op_plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_FLAGS) -D$(lastword $(subst :, ,$(filter $*:%,$(PLUGIN_VARIANTS)))) $< -o $@

# The tests load the example plugins from beside the test binary (build/examples/).
$(BUILD)/gptc_tests: $(TEST_OBJ) $(BUILD)/libgptc_cli.a $(BUILD)/libgptc.a | $(EXAMPLE_SO) $(EXAMPLES)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(EXAMPLES): $(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_tokenizer: $(BUILD)/bench/bench_tokenizer.o $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_attention: $(BUILD)/bench/bench_attention.o $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_matvec: $(BUILD)/bench/bench_matvec.o $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_gemm: $(BUILD)/bench/bench_gemm.o $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) -lopenblas

$(BUILD)/data/shakespeare/meta.json: data/tinyshakespeare.txt $(BUILD)/gptc
	$(BUILD)/gptc prepare --tokenizer byte data/tinyshakespeare.txt --out $(BUILD)/data/shakespeare

train: setup
	@$(MAKE) --no-print-directory $(BUILD)/gptc
	@$(MAKE) --no-print-directory $(BUILD)/data/shakespeare/meta.json
	$(BUILD)/gptc train --data $(BUILD)/data/shakespeare --ckpt $(RUN_DIR) $(TRAIN_ARGS)
	$(BUILD)/gptc sample --ckpt $(RUN_DIR) --prompt "ROMEO:" --tokens 300

test: setup
	@sh tools/setup.sh --browser || echo "setup: no chromium; the report screenshot test will be skipped"
	@$(MAKE) --no-print-directory $(BUILD)/gptc $(BUILD)/gptc_tests $(EXAMPLES)
	$(BUILD)/gptc_tests

# Regenerates the PyTorch reference fixtures, tanh and erf GELU, and the Hugging Face / llm.c weight
# files of tests/test_interop.c (needs Debian's python3-torch).
fixtures: setup
	@sh tools/setup.sh --torch
	/usr/bin/python3 tools/make_torch_fixture.py tests/fixtures/gpt2_tiny_torch.safetensors
	/usr/bin/python3 tools/make_torch_fixture.py --gelu erf tests/fixtures/gpt2_tiny_torch_erf.safetensors
	/usr/bin/python3 tools/make_hellaswag_fixture.py
	/usr/bin/python3 tools/make_interop_fixtures.py tests/fixtures/interop

bench: setup
	@sh tools/setup.sh --bench
	@$(MAKE) --no-print-directory $(BUILD)/gptc $(BUILD)/bench_gemm $(BUILD)/bench_attention $(BUILD)/bench_tokenizer \
		$(BUILD)/bench_matvec
	sh bench/gemm.sh
	$(BUILD)/bench_attention
	$(BUILD)/bench_matvec
	sh bench/train_e2e.sh

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (gcc), in its own folder:
# build-san/gptc_tests spawns build-san/gptc (test_gptc_bin looks beside the test binary). A UB report
# stops the process (-fno-sanitize-recover); ASan's leak check runs at every process's exit with the
# suppressions of tools/sanitize/lsan.supp (Open MPI's libraries only, each entry saying why). Those
# match on whole stacks, which the fast unwinder cannot take through Open MPI (no frame pointers), so
# the processes mpirun starts unwind fully (mca_base_env_list sets their ASAN_OPTIONS; elsewhere it
# would double the time of the allocation-heavy tests), and Open MPI's and PMIx's plugins stay loaded
# at exit (disable_dlclose) so that their frames have names. A test that ASan makes meaningless skips
# itself, saying why (SKIP_UNDER_ASAN in tests/test.h). `make test-sanitize TESTS=name` runs a subset.
SAN_BUILD := build-san
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_ASAN  := detect_leaks=1:abort_on_error=1:strict_string_checks=1
SAN_ENV   := ASAN_OPTIONS=$(SAN_ASAN) \
             LSAN_OPTIONS=suppressions=$(CURDIR)/tools/sanitize/lsan.supp:print_suppressions=0 \
             UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
             OMPI_MCA_mca_base_env_list="ASAN_OPTIONS=$(SAN_ASAN):fast_unwind_on_malloc=0" \
             OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
test-sanitize: setup
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) OPT=-O2 EXTRA_CFLAGS="$(SAN_FLAGS)" $(SAN_BUILD)/gptc $(SAN_BUILD)/gptc_tests
	$(SAN_ENV) $(SAN_BUILD)/gptc_tests $(TESTS)

# The suite on aarch64: cross-compiled with Debian's gcc-aarch64-linux-gnu into build-aarch64/ (the
# reference kernels, MPI=0) and run under qemu-aarch64-static on Debian's arm64 libraries (see
# tools/setup.sh --aarch64). The tests spawn gptc and the examples;
# without binfmt_misc (containers, CI) the kernel cannot run an aarch64 program, so GPTC_BIN names a
# wrapper script in build-aarch64/qemu/ that runs build-aarch64/gptc under qemu (likewise its
# examples/ beside it, plugins linked), and GPTC_TEST_RUNNER prefixes the test binary re-running
# itself (qemu resolves its /proc/self/exe from the path it was given: an absolute one, as tests
# chdir); `gptc bench --ablation` (it execs itself) and the host's Open MPI scripts skip, saying why.
# The whole suite took 48 minutes on 2 busy cores (train_bf16_loss_curve_tracks_fp32 alone 24), the
# build about 35 s of CPU. `make test-aarch64 TESTS=name`
# runs the tests whose names contain any of the words (.ci/run runs such a subset).
A64_BUILD := build-aarch64
A64_CC    := aarch64-linux-gnu-gcc
A64_QEMU  := qemu-aarch64-static
A64_WRAP  := gptc $(patsubst %.c,%,$(filter-out examples/op_plugin_%,$(wildcard examples/*.c)))
test-aarch64:
	@sh tools/setup.sh --aarch64
	@$(MAKE) --no-print-directory CC=$(A64_CC) BUILD=$(A64_BUILD) MPI=0 $(A64_BUILD)/gptc $(A64_BUILD)/gptc_tests
	@rm -rf $(A64_BUILD)/qemu && mkdir -p $(A64_BUILD)/qemu/examples
	@for b in $(A64_WRAP); do \
	    printf '#!/bin/sh\nexec %s %s "$$@"\n' '$(A64_QEMU)' '$(CURDIR)/$(A64_BUILD)/'$$b >$(A64_BUILD)/qemu/$$b; \
	    chmod +x $(A64_BUILD)/qemu/$$b; done
	@for so in $(A64_BUILD)/examples/*.so; do ln -s ../../examples/$${so##*/} $(A64_BUILD)/qemu/examples/; done
	GPTC_BIN=$(CURDIR)/$(A64_BUILD)/qemu/gptc GPTC_TEST_RUNNER='$(A64_QEMU)' $(A64_QEMU) $(CURDIR)/$(A64_BUILD)/gptc_tests $(TESTS)

# libFuzzer harnesses (fuzz/*.c) built with clang into build-fuzz/, each run for FUZZ_SECONDS on a
# copy of its seed corpus (fuzz/corpus/<target>); a crash, leak or sanitizer report fails the run and
# leaves the input in build-fuzz/crashes/<target>/. The inputs of fuzz/regressions/<target>/ (crashes
# found and fixed) are replayed first.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := safetensors shard tokenizer options
FUZZ_BUILD   := build-fuzz
FUZZ_SAN     := -Wno-unknown-warning-option -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_BUILD)/libgptc_cli.a $(FUZZ_BUILD)/libgptc.a
	$(FUZZ_CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(LDLIBS)

# Rewrites the binary seeds of fuzz/corpus/ (safetensors files, shards) with the library's writers.
fuzz-seeds: $(BUILD)/libgptc.a
	$(CC) $(CFLAGS) -o $(BUILD)/make_seeds fuzz/make_seeds.c $(BUILD)/libgptc.a $(LDLIBS)
	$(BUILD)/make_seeds

fuzz-build: setup
	@sh tools/setup.sh --fuzz
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) MPI=0 OPT=-O1 EXTRA_CFLAGS="$(FUZZ_SAN)" $(FUZZ_BINS)

fuzz-regress: fuzz-build
	@sh fuzz/run.sh regress $(FUZZ_BUILD) $(FUZZ_TARGETS)

fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh fuzz/run.sh fuzz $(FUZZ_BUILD) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD) $(A64_BUILD) build-cuda

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
