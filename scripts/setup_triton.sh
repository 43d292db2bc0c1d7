#!/usr/bin/env bash
# Set up NVIDIA PyTriton (a real tritonserver, Triton 2.51, that serves on CPU) for the live
# `triton` backend: tokenbench's decoupled model (src/tokenbench/backends/triton_model.py) runs
# under it and streams from an upstream engine (the embedded llama.cpp server, vLLM CPU).
#
#   scripts/setup_triton.sh        # idempotent (stamp file): ~0 s when done, ~30 s fresh
#
# Creates .cache/triton-venv (relative to the repo root), a venv of Debian's /usr/bin/python3.11:
# the Python backend stub shipped in the wheel links the SYSTEM libpython3.11.so, and under
# another 3.11 build (pyenv) the model fails to load ("'_thread.RLock' object has no attribute
# '_recursion_count'"); see the research notes, section 7. Overrides (env): TRITON_PYTHON,
# PYTRITON_VERSION.
set -euo pipefail

cd "$(dirname "$0")/.."

TRITON_PYTHON=${TRITON_PYTHON:-/usr/bin/python3.11}
PYTRITON_VERSION=${PYTRITON_VERSION:-0.7.0}
# what the model code needs beside pytriton (which brings numpy): nothing else (stdlib HTTP)
PKGS="nvidia-pytriton==$PYTRITON_VERSION"
VENV=.cache/triton-venv

key=$(printf '%s\n' "$TRITON_PYTHON" "$PKGS" | sha1sum | cut -c1-12)
STAMP=$VENV/.installed-$key
if [ -f "$STAMP" ]; then
    exit 0
fi
t0=$(date +%s)
command -v "$TRITON_PYTHON" >/dev/null || {
    echo "need $TRITON_PYTHON (Debian's python3.11; apt-get install python3.11-venv)" >&2
    exit 1
}
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV with $TRITON_PYTHON"
    "$TRITON_PYTHON" -m venv "$VENV"
fi
echo "== installing $PKGS into $VENV"
"$VENV/bin/pip" install --disable-pip-version-check -q "$PKGS"
# the server binary and the stub are in the wheel: check they import before stamping
"$VENV/bin/python" -c "import pytriton.triton, pytriton.model_config"
rm -f "$VENV"/.installed-*
touch "$STAMP"
echo "   took $(( $(date +%s) - t0 )) s"
