# Podium: every job starts here. The first target that needs Python creates .venv from
# pyproject.toml, so a fresh clone needs nothing but python3, g++, make and perl.

PYTHON_SYS ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
JOBS       ?= 2
SIM        ?= verilator
SHARD      ?=
TEST       ?= verification/tests/test_mxu.py::test_mxu[4x4-test_gemm_random]
CONFIG     ?=
ARGS       ?=

GOALS := help venv demo verilog lint test test-shard test-all formal mutate bench waves clean
.PHONY: $(GOALS)

# `make bench mxu hbm`: the words after bench that are no target are the benchmarks to run.
ifneq ($(filter bench,$(MAKECMDGOALS)),)
BENCHES := $(filter-out $(GOALS),$(MAKECMDGOALS))
$(BENCHES): ; @:
endif

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
	@echo "  variables: SIM=verilator|icarus  JOBS=$(JOBS)  TEST=<pytest node id> (for waves)"
	@echo "             SHARD=k/N (for test-shard; default: this commit's shard)"
	@echo "             CONFIG=<chip JSON file> (for demo: {\"block\": \"chip\", \"parameters\": {...}})"
	@echo "             ARGS=<more options> (demo: --dtype int8|bfloat16; bench: --quick, --render;"
	@echo "             mutate: --fast, --list, mutation names; formal: --list, set names)"

$(STAMP): pyproject.toml
	$(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

# An extra of pyproject.toml installed once, for the targets that need it (test: pytest,
# hypothesis and the solver of the proofs; dev: those and ruff; formal: the solver).
$(VENV)/.installed-%: $(STAMP)
	$(PY) -m pip install --quiet -e ".[$*]"
	touch $@

venv: $(STAMP)  ## create .venv and install the project into it

demo: $(STAMP)  ## generate the default chip, run the digits MLP on it in Verilator, check it, report
	$(PY) -m sim.demo $(if $(CONFIG),--config $(CONFIG)) $(ARGS)

verilog: $(STAMP)  ## generate the Verilog of every block's default configuration into build/verilog
	$(PY) -m sim.generate_all --out build/verilog

lint: $(VENV)/.installed-dev  ## ruff, and Verilator --lint-only of every generated top (reusing build/verilog-cache)
	$(VENV)/bin/ruff check .
	$(PY) -m sim.generate_all --out build/verilog --lint

test: $(VENV)/.installed-test  ## the regression (parallel; 25 minutes on a fresh clone, 2 cores)
	$(PY) -m pytest -n $(JOBS) --durations=25 -m "not slow" verification/tests

test-shard: $(VENV)/.installed-test  ## one shard of the slow tests (SHARD=k/N; default this commit's), as CI runs after test
	$(PY) -m verification.shards run --jobs $(JOBS) $(if $(SHARD),--shard $(SHARD))

test-all: $(VENV)/.installed-test  ## the regression plus long sweeps and large configurations
	$(PY) -m pytest -n $(JOBS) verification/tests

formal: $(VENV)/.installed-formal  ## formal proofs of the protocols (SymbiYosys, Z3); docs/formal.md
	$(PY) -m sim.formal $(ARGS)

mutate: $(VENV)/.installed-test  ## mutation tests: break rules on purpose, check tests fail; docs/results/mutations.md
	$(PY) -m sim.mutate $(ARGS)

bench: $(STAMP)  ## benchmarks (all, or some: make bench mxu hbm): tables, docs/results/
	$(PY) -m sim.bench $(BENCHES) $(ARGS)

waves: $(VENV)/.installed-test  ## run one test (TEST=...) with a waveform (FST; VCD from Verilator without liblz4)
	PODIUM_WAVES=1 $(PY) -m pytest -n 0 "$(TEST)"
	@find build/tests \( -name "*.fst" -o -name "*.vcd" \) -newer $(STAMP) -print

clean:  ## remove generated files (keeps .venv)
	rm -rf build .pytest_cache
