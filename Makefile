# qatscope — see README.md.  `make` builds bin/qatscope; `make test` runs the unit tests.
#
# Layout: every src/<part>/*.c and plots/*.c goes into build/libqatscope.a; src/cli/*.c
# makes the binary; tests/test_*.c + tests/runner.c make bin/test_runner;
# tests/bench/bench_*.c and tests/exhaustive/*.c are one program each.
# SIMD files are named for their ISA (*_avx2.c, *_avx512.c, *_avx512bf16.c, *_avx512vbmi.c,
# *_avx512bf16vbmi.c: both, *_amx.c, *_shani.c) and
# get that ISA's flags; everything else is baseline x86-64 (dispatch at run time).
#
# Knobs (each prints nothing unless set): WERROR=1, NO_OMP=1, SAN=1 (ASan+UBSan),
# BUILD=dir (object dir), DEBUG=1 (-O0), MPI=1 (Open MPI: CC=mpicc, objects in
# build/mpi, src/dist/dist_mpi.c instead of dist_single.c; the binary is still
# bin/qatscope and REPLACES the default one: switching flavours relinks every
# program in bin/, see BIN_FLAVOR; BIN=dir puts them elsewhere).

PKGS := jansson libpng libzstd openblas
APT_PKGS := build-essential pkg-config libjansson-dev libpng-dev libzstd-dev libopenblas-dev zstd \
            libopenmpi-dev openmpi-bin libtcmalloc-minimal4
# libtcmalloc-minimal4: the benches' tuned PyTorch baselines (tests/bench/bench_torch.h);
# python3-torch itself is optional (the baselines are skipped without it)

NO_DEP_GOALS := deps clean lint
ifeq ($(filter-out $(NO_DEP_GOALS),$(or $(MAKECMDGOALS),all)),)
else
ifneq ($(shell pkg-config --exists $(PKGS) 2>/dev/null && echo ok),ok)
$(error missing dev packages ($(PKGS)); run 'make deps' or: apt-get install $(APT_PKGS))
endif
endif

CC ?= gcc
ifneq ($(MPI),)
ifeq ($(origin CC),default)
CC := mpicc
endif
ifeq ($(filter $(NO_DEP_GOALS),$(MAKECMDGOALS)),)
ifeq ($(shell command -v $(CC) 2>/dev/null),)
$(error MPI=1 needs $(CC) (Open MPI); run 'make deps' or: apt-get install libopenmpi-dev openmpi-bin)
endif
endif
endif
BUILD ?= $(if $(SAN),build/san,$(if $(NO_OMP),build/noomp,$(if $(MPI),build/mpi,build)))
BIN ?= $(if $(SAN),build/san/bin,$(if $(NO_OMP),build/noomp/bin,bin))

OPT := $(if $(DEBUG),-O0,-O2)
SAN_ON := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SANFLAGS := $(if $(SAN),$(SAN_ON))
OMPFLAGS := $(if $(NO_OMP),,-fopenmp)

# -ffp-contract=off: no multiply-add is fused unless written as an intrinsic (the
# default of -std=c11, stated because the bit-equality tests of the portable and
# vector paths rest on it; -std=gnu11 would fuse)
CFLAGS := -std=c11 -ffp-contract=off -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(OPT) -g \
          -Wall -Wextra -Wpedantic -Wshadow -Wno-overlength-strings -Iinclude -MMD -MP \
          $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(OMPFLAGS) $(SANFLAGS) \
          $(if $(filter 1,$(WERROR)),-Werror) $(EXTRA_CFLAGS)
LDLIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(OMPFLAGS) $(SANFLAGS) -lm

ISA_avx2 := -mavx2 -mfma -mf16c
ISA_avx512 := $(ISA_avx2) -mavx512f -mavx512bw -mavx512dq -mavx512vl
ISA_avx512bf16 := $(ISA_avx512) -mavx512bf16
ISA_avx512vbmi := $(ISA_avx512) -mavx512vbmi
ISA_avx512bf16vbmi := $(ISA_avx512bf16) -mavx512vbmi
ISA_shani := -msha -mssse3 -msse4.1
ISA_amx := $(ISA_avx512bf16) -mamx-tile -mamx-bf16
isa_flags = $(if $(filter %_amx.c,$1),$(ISA_amx),$(if $(filter %_avx512bf16vbmi.c,$1),$(ISA_avx512bf16vbmi),$(if $(filter %_avx512bf16.c,$1),$(ISA_avx512bf16),$(if $(filter %_avx512vbmi.c,$1),$(ISA_avx512vbmi),$(if $(filter %_avx512.c,$1),$(ISA_avx512),$(if $(filter %_avx2.c,$1),$(ISA_avx2),$(if $(filter %_shani.c,$1),$(ISA_shani))))))))

# one implementation of include/qs/dist.h per flavour (the only build-time switch)
DIST_OFF := src/dist/$(if $(MPI),dist_single.c,dist_mpi.c)
LIB_SRC := $(sort $(filter-out src/cli/% $(DIST_OFF),$(wildcard src/*/*.c)) $(wildcard plots/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := tests/runner.c $(sort $(wildcard tests/test_*.c tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(wildcard tests/bench/bench_*.c))
EXH_SRC := $(sort $(wildcard tests/exhaustive/*.c))

obj = $(patsubst %.c,$(BUILD)/%.o,$1)
# Programs in $(BIN) remember which object dir they were linked from: when it
# changes (make, then make MPI=1, or back) every program relinks instead of
# keeping the other flavour's binary.
BIN_FLAVOR := $(BIN)/.flavor
link_inputs = $(filter %.o %.a,$^)
LIB := $(BUILD)/libqatscope.a
QATSCOPE := $(BIN)/qatscope
TEST_RUNNER := $(BIN)/test_runner
BENCHES := $(patsubst tests/bench/%.c,$(BIN)/%,$(BENCH_SRC))
EXHAUSTIVE := $(patsubst tests/exhaustive/%.c,$(BIN)/%,$(EXH_SRC))

.PHONY: all test check test-noomp test-mpi bench bench-dist demo reproduce test-exhaustive fuzz deps lint clean FORCE
all: $(QATSCOPE)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(call isa_flags,$<) -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN_FLAVOR): FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = "$(BUILD) $(CC)" ] || echo "$(BUILD) $(CC)" > $@

$(QATSCOPE): $(call obj,$(CLI_SRC)) $(LIB) $(BIN_FLAVOR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(link_inputs) $(LDLIBS)

$(TEST_RUNNER): $(call obj,$(TEST_SRC)) $(LIB) $(BIN_FLAVOR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(link_inputs) $(LDLIBS)

# bench headers are optional sections (bench_scale includes bench_scale_train.h
# when present): a header that appears must rebuild the benches
$(patsubst %.c,$(BUILD)/%.o,$(BENCH_SRC)): $(wildcard tests/bench/*.h)

$(BIN)/bench_%: $(BUILD)/tests/bench/bench_%.o $(LIB) $(BIN_FLAVOR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(link_inputs) $(LDLIBS)

$(BIN)/%: $(BUILD)/tests/exhaustive/%.o $(LIB) $(BIN_FLAVOR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(link_inputs) $(LDLIBS)

# Tests run from the repository root; CLI tests find the binary through QS_BIN.
test: $(TEST_RUNNER) $(QATSCOPE)
	QS_BIN=$(QATSCOPE) $(TEST_RUNNER) $(T)

# The same suite under ASan + UBSan (objects in build/san).
check:
	$(MAKE) SAN=1 test

# The same suite without OpenMP (build/noomp).
test-noomp:
	$(MAKE) NO_OMP=1 test

# The Open MPI binary in build/mpi/bin (bin/ keeps the default one), then the
# suite with QS_MPI_BIN set, which runs tests/test_cli_dist.c under mpirun.
test-mpi:
	$(MAKE) MPI=1 BIN=build/mpi/bin build/mpi/bin/qatscope
	QS_MPI_BIN=build/mpi/bin/qatscope $(MAKE) test T=$(or $(T),cli_dist)

bench: $(BENCHES) $(QATSCOPE)
	@for b in $(BENCHES); do echo "== $$b"; QS_BIN=$(QATSCOPE) $$b || exit 1; done

# Data-parallel training: one process x 2 threads against mpirun -np 2 x 1 thread
# (tests/bench/bench_dist.c, built in the MPI flavour; BENCH_DIST_ARGS="STEPS SHAPE").
bench-dist:
	$(MAKE) MPI=1 BIN=build/mpi/bin build/mpi/bin/bench_dist
	sh tools/bench_dist.sh build/mpi/bin/bench_dist $(BENCH_DIST_ARGS)

test-exhaustive: $(EXHAUSTIVE)
	@for e in $(EXHAUSTIVE); do echo "== $$e"; $$e || exit 1; done

# libFuzzer run of every tests/fuzz/fuzz_*.c target for FUZZ_SECONDS each (needs
# clang + libFuzzer; CI only replays the corpus in make test).  See tools/fuzz.sh.
fuzz:
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) sh tools/fuzz.sh $(FUZZ_TARGETS)

demo: $(QATSCOPE)
	$(QATSCOPE) demo

# The paper's study at small scale (README "Reproducing the paper"); REPRO_ARGS=--quick
# for the few-minute version CI runs.
reproduce: $(QATSCOPE)
	$(QATSCOPE) reproduce $(REPRO_ARGS)

deps:
	@if [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS); \
	else echo "run as root: apt-get install -y $(APT_PKGS)"; fi

lint:
	sh tools/lint.sh

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
