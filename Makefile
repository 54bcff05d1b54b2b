# megamoe: host C11 (src/) + CUDA kernels for sm_90a (kernels/) -> build/megamoe
#
# Variables (nccl-tests style):
#   CUDA_HOME   CUDA toolkit prefix (default /usr/local/cuda)
#   NCCL_HOME   prefix with include/nccl.h (default: CUDA_HOME if it has NCCL, else /usr)
#   MPI_HOME    Open MPI prefix (default: taken from `mpicc --showme`)
#   CJSON_HOME  prefix with include/cjson/cJSON.h and lib*/libcjson.so (default /usr)
#   DEBUG=1     -g -G -lineinfo, no optimisation
#
# Targets: all (default), deps, run, test, test-gpu, fuzz, plots, clean

CUDA_HOME ?= /usr/local/cuda
CJSON_HOME ?= /usr
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC := gcc
CXX ?= g++
# Open MPI refuses root without these; CI and the GPU machines run as root, and a user's
# `make test` must work exactly as typed. Exported to every recipe (the tests' mpirun lines too).
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

# `make run`: one rank per local GPU. Counted (and refused without one) before anything is built
# or installed, so a machine without a GPU gets one line instead of mpirun's complaints.
ifneq ($(filter run,$(MAKECMDGOALS)),)
  NP ?= $(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU'; true)
  ifeq ($(strip $(NP)),0)
    $(error megamoe: error: make run: no NVIDIA GPU found (nvidia-smi lists none); bench needs one GPU per rank, plan and gate run without one)
  endif
endif

ifeq ($(NCCL_HOME),)
  ifneq ($(wildcard $(CUDA_HOME)/include/nccl.h),)
    NCCL_HOME := $(CUDA_HOME)
  else
    NCCL_HOME := /usr
  endif
endif
NCCL_LIBDIR := $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so $(NCCL_HOME)/lib/libnccl.so $(NCCL_HOME)/lib/x86_64-linux-gnu/libnccl.so $(NCCL_HOME)/lib/x86_64-linux-gnu/libnccl.so.2))
NCCL_LIBDIR := $(if $(NCCL_LIBDIR),$(dir $(NCCL_LIBDIR)),$(NCCL_HOME)/lib)

ifeq ($(MPI_HOME),)
  MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
else
  MPI_CFLAGS := -I$(MPI_HOME)/include
  MPI_LIBS := -L$(MPI_HOME)/lib -Wl,-rpath,$(MPI_HOME)/lib -lmpi
endif

CJSON_LIBDIR := $(firstword $(dir $(wildcard $(CJSON_HOME)/lib/x86_64-linux-gnu/libcjson.so* $(CJSON_HOME)/lib64/libcjson.so* $(CJSON_HOME)/lib/libcjson.so*)))
CJSON_LIBDIR := $(if $(CJSON_LIBDIR),$(CJSON_LIBDIR:%/=%),$(CJSON_HOME)/lib)
CJSON_LIBFILE := $(firstword $(wildcard $(CJSON_LIBDIR)/libcjson.so $(CJSON_LIBDIR)/libcjson.so.1))
CJSON_CFLAGS := $(if $(filter /usr,$(CJSON_HOME)),,-I$(CJSON_HOME)/include)
# Link the library file itself when only libcjson.so.1 exists (a staged runtime package).
CJSON_LIBS := -L$(CJSON_LIBDIR) -Wl,-rpath,$(CJSON_LIBDIR) $(if $(filter %.so.1,$(CJSON_LIBFILE)),-l:libcjson.so.1,-lcjson)

ifeq ($(DEBUG),1)
  OPT := -O0 -g
  NVOPT := -O0 -g -G -lineinfo
else
  OPT := -O2 -g
  NVOPT := -O3 -lineinfo
endif

# -ffp-contract=off: the host must round like the GPU's explicit _rn operations (recipe.h).
CFLAGS_COMMON := -std=c11 -Wall -Wextra -ffp-contract=off $(CJSON_CFLAGS)
CFLAGS := $(CFLAGS_COMMON) -fopenmp $(OPT) -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include $(MPI_CFLAGS) -Werror
NVFLAGS := -gencode=arch=compute_90a,code=sm_90a -std=c++17 $(NVOPT) -Ikernels -I$(NCCL_HOME)/include \
           -Xcompiler -Wall -Xptxas -warn-spills $(NVEXTRA)
LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublasLt \
          -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl $(MPI_LIBS) $(CJSON_LIBS) -lm -ldl -lstdc++ \
          -fopenmp

BUILD := build
# Host files that need neither CUDA nor MPI: the CPU tests and the fuzzer link these.
PURE_SRC := src/common.c src/config.c src/sweep.c src/plan.c src/stats.c src/report.c \
            src/cli.c src/datagen_host.c src/gate.c src/reference.c src/scenarios.c src/lt_layout.c \
            src/gemm_report.c src/power.c
HOST_SRC := $(PURE_SRC) src/launch.c src/runtime.c src/timing.c src/bench.c src/check.c src/modes.c src/mode_ll.c src/mode_fused.c src/mode_normal.c src/gemm_bench.c src/gemm_cublaslt.c src/ceilings.c src/selftest.c src/version.c src/main.c
CU_SRC := $(wildcard kernels/*.cu)
HOST_OBJ := $(HOST_SRC:%.c=$(BUILD)/%.o)
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/%.o)
HEADERS := $(wildcard src/*.h kernels/*.h kernels/*.cuh)

.PHONY: all fake-nvml inject fault steps trace audit audit-break deps test-deps run test test-run test-gpu fuzz plots clean FORCE
all: $(BUILD)/megamoe

$(BUILD)/megamoe: $(HOST_OBJ) $(CU_OBJ)
	$(CXX) -o $@ $^ $(LDLIBS)

GIT_REV ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/src/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMM_GIT_REV='"$(GIT_REV)"' -c $< -o $@

# bench.c records the revision in every JSON: rebuild it when the revision changes, not only
# when a source does (a build directory reused with another GIT_REV kept the old name)
$(BUILD)/git_rev.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(GIT_REV)' | cmp -s - $@ || echo '$(GIT_REV)' > $@
$(BUILD)/src/bench.o: $(BUILD)/git_rev.stamp
FORCE:

$(BUILD)/kernels/%.o: kernels/%.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# A test build whose fused kernel and grouped GEMM stall one CTA's producer past the pipeline's
# wait bound, and whose fused kernel holds two math warps per CTA before their register increase
# (kernels/comm.cuh mm_inject_stall, kernels/fused.cu inject_late_math): gpu-check expects named
# TIMEOUTs, not hangs.
inject:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/inject \
	  NVEXTRA="-DMM_INJECT_STALL_MS=12000 -DMM_FUSED_INJECT_LATE_MATH_US=2000" \
	  $(BUILD)/inject/megamoe

# A test build whose fused kernel and grouped GEMM fault (item 0's producer stores to an unmapped
# address; kernels/comm.cuh mm_inject_stall): gpu-check expects exit 3 with the CUDA error named.
fault:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/fault NVEXTRA=-DMM_INJECT_FAULT $(BUILD)/fault/megamoe

# A diagnostic build whose fused kernel writes each thread's wait to host-mapped words and whose
# host prints them when a launch has not ended after MM_STEPS_AFTER_S seconds (kernels/gemm_tile.cuh).
steps:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/steps NVEXTRA=-DMM_STEPS $(BUILD)/steps/megamoe

# A diagnostic build whose fused --breakdown calls also print the counts hand-off's steps and write
# each CTA's first items' times to $$MM_TRACE_ITEMS_FILE.<rank> (kernels/api.h).
trace:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/trace NVEXTRA=-DMM_FUSED_TRACE $(BUILD)/trace/megamoe

# A diagnostic build whose stage rings check their own protocol as they run: a refill of a stage
# some math warp still reads prints "ring audit: ..." (kernels/gemm_tile.cuh MM_RING_AUDIT).
audit:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/audit NVEXTRA=-DMM_RING_AUDIT $(BUILD)/audit/megamoe

# The audit's own test: the same build with one math warp arriving twice on `empty`; its runs must
# print "ring audit: ..." (gpu-check), or the audit could not see a broken ring.
audit-break:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/audit-break NVEXTRA="-DMM_RING_AUDIT -DMM_RING_AUDIT_BREAK" \
	  $(BUILD)/audit-break/megamoe

deps:
	scripts/install-deps.sh

test-deps:
	scripts/install-deps.sh --test

# The main job: all local GPUs, the default config (deepseek-v4-flash).
run: deps
	$(MAKE) --no-print-directory all
	NCCL_NVLS_ENABLE=0 mpirun -np $(NP) --bind-to none $(BUILD)/megamoe bench

# ---- CPU tests (no GPU needed) --------------------------------------------------------------
TEST_SRC := $(wildcard tests/test_*.c)
TEST_CFLAGS := $(CFLAGS_COMMON) -fopenmp -Werror -O1 -g -Isrc -Ikernels
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TEST_LIBS := $(CJSON_LIBS) -lcmocka -lm -ldl

# NVML's stand-in (tests/fake_nvml.c): the CPU tests open it by this path; gpu-check points
# MEGAMOE_NVML_LIBRARY at it to make NVML fail in the middle of an --energy-ms loop
FAKE_NVML := $(abspath $(BUILD))/libmegamoe-fake-nvml.so
TEST_CFLAGS += -DMM_TEST_FAKE_NVML='"$(FAKE_NVML)"'

$(FAKE_NVML): tests/fake_nvml.c
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_COMMON) -Werror -O1 -shared -fPIC -o $@ $<

$(BUILD)/test_host: $(TEST_SRC) $(PURE_SRC) $(HEADERS) $(FAKE_NVML)
	@mkdir -p $(BUILD)
	$(CC) $(TEST_CFLAGS) -o $@ $(TEST_SRC) $(PURE_SRC) $(TEST_LIBS)

$(BUILD)/test_host_asan: $(TEST_SRC) $(PURE_SRC) $(HEADERS) $(FAKE_NVML)
	@mkdir -p $(BUILD)
	$(CC) $(TEST_CFLAGS) $(SAN) -o $@ $(TEST_SRC) $(PURE_SRC) $(TEST_LIBS)

fake-nvml: $(FAKE_NVML)

$(BUILD)/mpi_agree: tests/mpi_agree.c src/launch.c src/common.c $(HEADERS)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_COMMON) -Werror -O1 -g -Isrc $(MPI_CFLAGS) -o $@ tests/mpi_agree.c \
	  src/launch.c src/common.c $(MPI_LIBS)

FUZZ_SECONDS ?= 20
$(BUILD)/fuzz_parsers: tests/fuzz/fuzz_parsers.c src/config.c src/sweep.c src/common.c $(HEADERS)
	@mkdir -p $(BUILD)
	clang $(CFLAGS_COMMON) -g -O1 -Isrc -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=all -o $@ tests/fuzz/fuzz_parsers.c src/config.c src/sweep.c \
	  src/common.c $(CJSON_LIBS) -lm

fuzz: $(BUILD)/fuzz_parsers
	@mkdir -p $(BUILD)/fuzz-corpus
	$(BUILD)/fuzz_parsers -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	  -print_final_stats=1 $(BUILD)/fuzz-corpus tests/fuzz/corpus

# `make test` installs what it needs first (as root), then builds and runs every CPU test.
test: test-deps
	$(MAKE) --no-print-directory test-run

test-run: $(BUILD)/megamoe $(BUILD)/test_host $(BUILD)/test_host_asan $(BUILD)/fuzz_parsers \
          $(BUILD)/mpi_agree
	$(BUILD)/test_host
	ASAN_OPTIONS=detect_leaks=1 $(BUILD)/test_host_asan
	timeout 120 mpirun -np 4 --oversubscribe $(BUILD)/mpi_agree
	$(BUILD)/mpi_agree watchdog 2>$(BUILD)/watchdog.err; test $$? -eq 4 && \
	  grep -q "a step that hangs did not finish within 1 s" $(BUILD)/watchdog.err
	tests/test_cli.sh $(BUILD)/megamoe
	tests/test_gate.sh $(BUILD)/megamoe
	tests/test_ep_invariance.sh
	tests/test_racecheck_unknown.sh
	NVCC=$(NVCC) tests/test_ptxas.sh
	NVCC=$(NVCC) lab/tests/run.sh
	/usr/bin/python3 scripts/plot.py tests/gate/base.json $(BUILD)/plot-test
	test -s $(BUILD)/plot-test/latency.png && test -s $(BUILD)/plot-test/speedup.png && \
	  test -s $(BUILD)/plot-test/floor_ratio.png
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)

# Plots of a results file: make plots RESULTS=results/h200-ep2/deepseek-v4-flash.json [PLOTS=dir].
# They go under build/ unless PLOTS names a folder: reading a results file leaves the tree clean
# (the committed plots are refreshed on purpose, PLOTS=results/.../NAME-plots).
RESULTS ?= results/h200-ep2/deepseek-v4-flash.json
PLOTS ?= $(BUILD)/plots/$(basename $(notdir $(RESULTS)))
plots:
	/usr/bin/python3 scripts/plot.py $(RESULTS) $(PLOTS)
	@echo "plots of $(RESULTS) in $(PLOTS)"

# ---- GPU checks (on a machine with GPUs) -----------------------------------------------------
test-gpu: all
	scripts/gpu-check.sh $(or $(LOGDIR),$(BUILD)/gpu-logs)

clean:
	rm -rf $(BUILD)
