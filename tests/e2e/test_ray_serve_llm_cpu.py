"""Ray Serve LLM (ray.serve.llm 2.60.0, what RayLLM became) over vLLM's CPU build, launched by
`tokenbench run --backend ray` with no upstream: the vLLM engine inside Ray behind Serve's OpenAI
ingress. Set up by scripts/setup_rayllm_cpu.sh (make test runs it; cached in .cache/).

Known answer for the response batcher knob: --layer-arg stream_batching_interval_ms=600000 makes
Ray Serve LLM hold each reply until its engine stream ends (the batcher flushes when its interval
passes or the stream is done), so a reply's events all arrive in one read: every chunk of a
record has the same arrival time, and TTFT equals E2E."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory, rayllm_cpu):
    """Its own launch: the vLLM engine runs inside Ray (Ray Serve LLM's own), with the batcher
    setting under test, so no plain vLLM server can stand in for it."""
    out = tmp_path_factory.mktemp("rayllm") / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "run",
            "--backend",
            "ray",
            "--model",
            str(rayllm_cpu.model),
            "--served-model-name",
            "smollm2",
            "--engine-bin",
            str(rayllm_cpu.python),
            "--engine-arg",
            'llm_config.accelerator_config={"kind": "cpu"}',
            "--engine-arg",
            "enforce_eager=true",
            "--engine-arg",
            "max_model_len=512",
            "--engine-arg",
            "kv_cache_memory_bytes=23592960",
            "--max-num-seqs",
            "4",
            "--layer-arg",
            "ray_init.num_cpus=4",
            "--layer-arg",
            "stream_batching_interval_ms=600000",
            "--api",
            "chat",
            "--users",
            "2",
            "--duration",
            "6",
            "--input-tokens",
            "32",
            "--output-tokens",
            "16",
            "--metrics-interval",
            "0.5",
            "--out",
            str(out),
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_every_reply_came_in_one_batch_of_several_events(llm_run):
    records = [json.loads(line) for line in (llm_run / "records.jsonl").read_text().splitlines()]
    assert records and all(r["outcome"] == "ok" for r in records)
    assert all(len(r["chunk_times_s"]) >= 2 for r in records)  # several events ...
    assert all(len(set(r["chunk_times_s"])) == 1 for r in records)  # ... in one read
    point = json.loads((llm_run / "results.json").read_text())["points"][0]
    assert point["ttft_s"]["mean"] == pytest.approx(point["e2e_s"]["mean"])


def test_results_name_ray_serve_llm_and_its_vllm_metrics(llm_run, rayllm_cpu):
    results = json.loads((llm_run / "results.json").read_text())
    target = results["target"]
    assert (target["backend"], target["engine_version"]) == ("ray", "2.60.0")
    assert target["command"][:2] == [str(rayllm_cpu.python), "-c"] and "upstream" not in target
    config = json.loads(target["command"][3])
    assert config["llm_config"]["experimental_configs"] == {"stream_batching_interval_ms": 600000}
    server = results["points"][0]["server"]
    # vLLM's own series exported through Ray (ray_vllm_*): its token counter and TTFT histogram
    assert server["generated_tokens"] > 0 and server["ttft_count"] > 0
