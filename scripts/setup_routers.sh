#!/usr/bin/env bash
# Install the routers tokenbench launches in front of a fleet of replicas (--backend vllm-router,
# sglang-router; src/tokenbench/backends/routers.py): both are Rust binaries in abi3 wheels with a
# Python launcher and light dependencies, from PyPI.
#
#   scripts/setup_routers.sh        # idempotent (stamp file): ~0 s when done, ~10-20 s fresh
#
# Creates .cache/router-venv (relative to the repo root) with the console scripts
# .cache/router-venv/bin/vllm-router and .cache/router-venv/bin/sglang-router. Overrides (env):
# PYTHON (python3.11), VLLM_ROUTER_VERSION, SGLANG_ROUTER_VERSION, UV_BIN (.venv/bin/uv).
set -euo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VLLM_ROUTER_VERSION=${VLLM_ROUTER_VERSION:-0.1.17}
SGLANG_ROUTER_VERSION=${SGLANG_ROUTER_VERSION:-0.3.2}
PKGS=("vllm-router==$VLLM_ROUTER_VERSION" "sglang-router==$SGLANG_ROUTER_VERSION")
VENV=.cache/router-venv

key=$(printf '%s\n' "$PYTHON" "${PKGS[@]}" | sha1sum | cut -c1-12)
STAMP=$VENV/.installed-$key
if [ -f "$STAMP" ]; then
    exit 0
fi
t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null || { echo "need $PYTHON on PATH (set PYTHON=...)" >&2; exit 1; }
    echo "== creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi
# uv (make setup puts it in .venv) when it is there, as setup_vllm_cpu.sh; else the venv's pip
UV_BIN=${UV_BIN:-.venv/bin/uv}
echo "== installing ${PKGS[*]} into $VENV"
if [ -x "$UV_BIN" ]; then
    env VIRTUAL_ENV="$PWD/$VENV" UV_COMPILE_BYTECODE=1 "$UV_BIN" pip install -q "${PKGS[@]}"
else
    "$VENV/bin/pip" install --disable-pip-version-check -q "${PKGS[@]}"
fi
# the console scripts the profiles run: each must start and print its help before stamping
"$VENV/bin/vllm-router" --help >/dev/null
"$VENV/bin/sglang-router" launch --help >/dev/null
rm -f "$VENV"/.installed-*
touch "$STAMP"
echo "   took $(( $(date +%s) - t0 )) s"
