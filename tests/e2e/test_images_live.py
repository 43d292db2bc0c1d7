"""Images against the real embedded llama.cpp server (xllamacpp + SmolLM2-135M GGUF, text only: no
multimodal projector ships in a package here). A text-only server refuses image_url parts; each
such request must be a failed record carrying the server's own message, the point failed (exit 4,
the failure rule), never a crash: no traceback, results.json and the records written."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

REFUSAL = "image input is not supported"  # llama.cpp's server without --mmproj (HTTP 500)


@pytest.fixture(scope="module")
def refused(tmp_path_factory, embedded_gguf):
    out = tmp_path_factory.mktemp("e2e") / "images"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "run", "--users", "1", "--max-requests", "3", "--images", "1-2"]
        + ["--image-size", "32x32", "--input-tokens", "16", "--output-tokens", "4", "--out", str(out), "--no-live"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, out


def test_a_text_only_server_refusing_images_is_recorded_as_failed_requests(refused):
    proc, out = refused
    assert proc.returncode == 4, proc.stderr[-3000:]  # the point failed: every request was refused
    assert "Traceback" not in proc.stderr
    assert REFUSAL in proc.stderr  # what the server said, on the console
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3
    for r in records:
        assert r["outcome"] == "http_error" and r["status"] == 500
        assert REFUSAL in r["error"]
        assert r["images"] in (1, 2) and r["image_pixels"] == r["images"] * 32 * 32
    point = json.loads((out / "results.json").read_text())["points"][0]
    assert point["requests"]["by_outcome"] == {"http_error": 3}
    assert any(REFUSAL in e["text"] for e in point["errors_seen"])
    assert point["images"]["requests"] == 3 and point["images"]["ok_requests"] == 0
    assert point["images"]["images_per_s"] in (0, None)
