# tpusim -- build, test and run. See README.md.
#
#   make            build ./tpusim and build/libtpusim.a
#   make deps       install missing Debian packages (apt-get; does nothing when all are there)
#   make run        deps + build + the main job
#   make test       deps + build + layering check + unit tests (Criterion) + command-line tests
#                   + make docs-check
#   make docs-check the README, docs/ and docs/labs/ examples run and compared, the pictures'
#                   data redrawn and compared (tests/docs.sh), and a stale copy shown to fail
#                   (tests/docs_stale.sh)
#   make docs       regenerate them: every example's output, the generated tables
#                   (docs/validation.md) and the pictures of docs/img/
#   make asan       the same tests, built with AddressSanitizer + UBSan
#   make valgrind   the command-line tests under valgrind
#   make bench      benchmarks (figures as rates and ratios)
#   make validate   the public runs through `tpusim validate`; rewrites docs/validation.md's tables
#   make fuzz       libFuzzer over every loader, FUZZ_SECONDS each (default 60; clang)

BUILD       ?= build
BIN         ?= tpusim
LLVM_CONFIG ?= llvm-config-19
PKG_CONFIG  ?= pkg-config

DEB_PKGS = llvm-19-dev libcjson-dev libsdl2-dev libsdl2-ttf-dev fonts-dejavu-core \
           gnuplot-nox libcriterion-dev pkg-config clang libclang-rt-dev \
           libopenmpi-dev openmpi-bin

# MPI for `mpirun -n N tpusim sweep` (docs/sweep.md): when OpenMPI's mpicc
# is found, cli/sweep_mpi.c is compiled with its flags and tpusim links its
# libraries (what `mpicc` adds, taken from `mpicc --showme`); without it the
# build is the same program, whose sweep refuses to run under mpirun. MPI=0
# leaves it out (make asan does: MPI's own allocations would read as leaks).
MPICC ?= mpicc
MPI_LINK := $(shell $(MPICC) --showme:link 2>/dev/null)
MPI ?= $(if $(MPI_LINK),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DTPUSIM_MPI $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS := $(MPI_LINK)
endif

# The reference data the tests read (reference/hlo/ ...): by default the
# `shared` folder beside this repository, found from this Makefile's folder,
# so it is the same from any current directory and for `make asan`;
# TPUSIM_SHARED=DIR when it is elsewhere. Exported to the tests, and built
# into tests/helpers.o for build/tests/unit run by hand.
ROOT          := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
TPUSIM_SHARED ?= $(abspath $(ROOT)/../shared)
export TPUSIM_SHARED

WARN    = -Wall -Wextra -Werror
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=c17 $(WARN) $(CFLAGS) $(EXTRA_CFLAGS) -D_POSIX_C_SOURCE=200809L -I. \
             $(shell $(PKG_CONFIG) --cflags libcjson 2>/dev/null)

# LLVM and SDL headers are visible only to the module that owns them, so the
# seams in docs/architecture.md hold by construction.
LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --cflags 2>/dev/null | sed 's/-std=[^ ]*//g')
SDL_CFLAGS  = $(shell $(PKG_CONFIG) --cflags sdl2 SDL2_ttf 2>/dev/null)
LIBS = $(shell $(LLVM_CONFIG) --ldflags --libs core 2>/dev/null) \
       $(shell $(PKG_CONFIG) --libs libcjson sdl2 SDL2_ttf 2>/dev/null) $(MPI_LIBS) -lm -pthread
CRITERION_LIBS = $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null || echo -lcriterion)

LIB_SRC = $(wildcard base/*.c hw_models/*.c workloads/*.c sim/*.c planner/*.c viz/*.c cli/*.c)
# EXCLUDE: sources to leave out of a development build (work in progress).
LIB_SRC := $(filter-out cli/main.c base/embed.c $(EXCLUDE),$(LIB_SRC))
HW_JSON = $(sort $(wildcard hw_models/*.json))
EXAMPLES = $(sort $(wildcard workloads/examples/*.json workloads/examples/*.hlo))
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/hw_catalog_data.o $(BUILD)/examples_data.o
TEST_SRC = $(filter-out $(EXCLUDE),$(wildcard tests/*.c))
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all deps run test check check-layers unit cli docs docs-check asan valgrind bench fuzz fuzz-run clean \
        validate sweep

all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/sim/lower.o $(BUILD)/sim/lower_emit.o $(BUILD)/sim/lower_ops.o $(BUILD)/sim/lower_custom.o: ALL_CFLAGS += $(LLVM_CFLAGS)
$(BUILD)/viz/%.o: ALL_CFLAGS += $(SDL_CFLAGS)
$(BUILD)/tests/helpers.o: ALL_CFLAGS += -DTPUSIM_SHARED_DEFAULT='"$(TPUSIM_SHARED)"'
$(BUILD)/cli/sweep_mpi.o: ALL_CFLAGS += $(MPI_CFLAGS)
$(BUILD)/cli/sweep_mpi.o: $(BUILD)/.mpi

# Changes when MPI is turned on or off, so sweep_mpi.o is rebuilt.
$(BUILD)/.mpi: FORCE
	@mkdir -p $(dir $@)
	@echo '$(MPI)' | cmp -s - $@ || echo '$(MPI)' > $@

$(BUILD)/embed: base/embed.c
	@mkdir -p $(BUILD)
	$(CC) -std=c17 $(WARN) -O1 $< -o $@

# The catalog and the example models are compiled in, so the binary works
# from any directory.
$(BUILD)/hw_catalog_data.c: $(BUILD)/embed $(HW_JSON)
	$(BUILD)/embed $@ hw_files $(HW_JSON)

$(BUILD)/examples_data.c: $(BUILD)/embed $(EXAMPLES)
	$(BUILD)/embed $@ wl_example_files $(EXAMPLES)

$(BUILD)/%_data.o: $(BUILD)/%_data.c
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libtpusim.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(BIN): $(BUILD)/cli/main.o $(BUILD)/libtpusim.a
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/unit: $(TEST_OBJ) $(BUILD)/libtpusim.a $(BUILD)/tests/.list
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/libtpusim.a $(CRITERION_LIBS) $(LIBS)

# Changes when a test file is added or removed, so the binary is relinked.
$(BUILD)/tests/.list: FORCE
	@mkdir -p $(dir $@)
	@echo '$(TEST_OBJ)' | cmp -s - $@ || echo '$(TEST_OBJ)' > $@

FORCE:

deps:
	@missing=""; \
	for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The main job: plan the training of an example model over the catalog.
run: deps
	@$(MAKE) --no-print-directory all
	./$(BIN) plan llama3-8b --max-chips 256

# Criterion has each test's result before a forked worker exits, so a leak
# LeakSanitizer reports at exit would not fail the run: the log is checked
# (tests/leaks.sh says why leaks inside libcriterion alone do not count).
# LSan's exit code is off for the same reason: the log decides.
unit: $(BUILD)/tests/unit
	@LSAN_OPTIONS=exitcode=0 $(BUILD)/tests/unit --jobs 2 >$(BUILD)/unit.log 2>&1; rc=$$?; \
	cat $(BUILD)/unit.log; \
	if ! bash tests/leaks.sh $(BUILD)/unit.log; then echo "unit: memory leaks (above)"; exit 1; fi; \
	exit $$rc

cli: $(BIN)
	TPUSIM=./$(BIN) bash tests/cli.sh

# README.md's, docs/*.md's and docs/labs/*.md's `$ ./tpusim` examples and
# generated tables, run and compared, and the data of docs/img's pictures
# redrawn and compared; then a copy with a number changed must fail.
docs-check: $(BIN)
	@TPUSIM=./$(BIN) bash tests/docs.sh
	@TPUSIM=./$(BIN) bash tests/docs_stale.sh

# The same pages and pictures written from a fresh run: outputs, tables,
# docs/img (review the diff: only what the change meant should move).
docs: $(BIN)
	@TPUSIM=./$(BIN) bash docs/labs/data/make.sh
	@TPUSIM=./$(BIN) bash tests/docs.sh --update
	@TPUSIM=./$(BIN) bash tests/docs.sh --images

# Every row of the public run sets through `tpusim validate` (one generic
# mapping, tests/validation/mapping.csv), then docs/validation.md's tables
# rewritten from the same command (make docs-check compares them).
validate: $(BIN)
	./$(BIN) validate $(TPUSIM_SHARED)/reference/public-runs.csv
	./$(BIN) validate $(TPUSIM_SHARED)/reference/public-runs-modern.csv
	@TPUSIM=./$(BIN) bash tests/docs.sh --update docs/validation.md

# Layers run one way (docs/architecture.md): includes from the sources,
# calls from the objects the library was built from.
check-layers: $(BUILD)/libtpusim.a $(BUILD)/cli/main.o
	@bash tests/layers.sh $(BUILD)

# `tpusim sweep`: a small study, resumed after a kill, and under
# `mpirun -n 2` compared byte for byte (skipped, with a message, without MPI).
sweep: $(BIN)
	TPUSIM=./$(BIN) TPUSIM_MPI=$(MPI) bash tests/sweep.sh

check: check-layers unit cli sweep docs-check

test: deps
	@$(MAKE) --no-print-directory check

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/tpusim CFLAGS="-O1 -g" MPI=0 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  check

valgrind: $(BIN)
	TPUSIM="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite ./$(BIN)" \
	  bash tests/cli.sh

# Every tests/bench/*.c is its own benchmark program; `make bench` runs them
# all in name order.
BENCH_SRC = $(sort $(wildcard tests/bench/*.c))
BENCH_BIN = $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libtpusim.a
	@mkdir -p $(BUILD)/bench
	$(CC) $(ALL_CFLAGS) $(SDL_CFLAGS) -O2 -o $@ $< $(BUILD)/libtpusim.a $(LIBS)

bench: $(BENCH_BIN) $(BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done
	@echo "== tests/bench/sweep.sh"; TPUSIM=./$(BIN) TPUSIM_MPI=$(MPI) bash tests/bench/sweep.sh

# Fuzzing (tests/fuzz/): the library built by clang with libFuzzer's
# coverage and ASan + UBSan into build-fuzz/, one harness a loader (the
# JSON reader, model.json / HF config, hardware files, HLO text, traces),
# each run for FUZZ_SECONDS after its regression inputs (tests/fuzz/run.sh).
FUZZ_SECONDS ?= 60
FUZZ_NAMES = jin model hw hlo trace runs sweep
FUZZ_CC ?= clang

fuzz: deps
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=$(FUZZ_CC) BIN=build-fuzz/tpusim CFLAGS="-O1 -g" MPI=0 \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" fuzz-run

fuzz-run: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
	@bash tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(BUILD)/libtpusim.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SDL_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< \
	  $(BUILD)/libtpusim.a $(LIBS)

clean:
	rm -rf build build-asan build-fuzz $(BIN)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
