"""Write a tiny multimodal projector GGUF with random weights for a text model: a LLaVA-style
("mlp") CLIP vision encoder (2 blocks of 64 wide, 64x64 images in 16x16 patches: 16 image tokens)
and a 2-layer MLP onto the text model's embedding width (576 for SmolLM2-135M). llama.cpp's
server loads it with ``--mmproj`` and then takes image_url parts: what images cost to serve, not
what the model sees (the weights are noise). Needs the ``gguf`` package (in the vLLM CPU venv).

    python scripts/tiny_mmproj.py OUT.gguf [TEXT_EMBD]
"""

from __future__ import annotations

import sys

import gguf  # type: ignore[import-not-found]
import numpy as np

WIDTH, FFN, BLOCKS, HEADS, IMAGE, PATCH = 64, 128, 2, 4, 64, 16
TOKENS_PER_IMAGE = (IMAGE // PATCH) ** 2  # the mlp projector: one token a patch


def write(out: str, text_embd: int = 576) -> None:
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(out, "clip")
    w.add_string("general.name", "tokenbench tiny random projector")
    w.add_uint32("general.file_type", 0)  # all f32
    w.add_string("clip.projector_type", "mlp")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_text_encoder", False)
    w.add_bool("clip.has_llava_projector", True)
    w.add_bool("clip.use_gelu", True)
    for key, value in (
        ("image_size", IMAGE),
        ("patch_size", PATCH),
        ("embedding_length", WIDTH),
        ("feed_forward_length", FFN),
        ("projection_dim", text_embd),
        ("block_count", BLOCKS),
        ("attention.head_count", HEADS),
    ):
        w.add_uint32(f"clip.vision.{key}", value)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    def noise(name: str, *shape: int) -> None:  # numpy (out, in) is ggml's [in, out]
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    def norm(name: str) -> None:
        w.add_tensor(f"{name}.weight", np.ones(WIDTH, np.float32))
        noise(f"{name}.bias", WIDTH)

    noise("v.patch_embd.weight", WIDTH, 3, PATCH, PATCH)
    noise("v.class_embd", WIDTH)
    noise("v.position_embd.weight", TOKENS_PER_IMAGE + 1, WIDTH)
    norm("v.pre_ln")
    for i in range(BLOCKS):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            noise(f"v.blk.{i}.{name}.weight", WIDTH, WIDTH)
            noise(f"v.blk.{i}.{name}.bias", WIDTH)
        norm(f"v.blk.{i}.ln1")
        norm(f"v.blk.{i}.ln2")
        noise(f"v.blk.{i}.ffn_up.weight", FFN, WIDTH)
        noise(f"v.blk.{i}.ffn_up.bias", FFN)
        noise(f"v.blk.{i}.ffn_down.weight", WIDTH, FFN)
        noise(f"v.blk.{i}.ffn_down.bias", WIDTH)
    noise("mm.0.weight", text_embd, WIDTH)
    noise("mm.0.bias", text_embd)
    noise("mm.2.weight", text_embd, text_embd)
    noise("mm.2.bias", text_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 576)
    print(sys.argv[1])
