"""End to end on the embedded llama.cpp server (xllamacpp + SmolLM2-135M GGUF): a 3-turn session.

Turn 3's request carries turns 1 and 2 and both replies the server really streamed: the server's
prompt token count equals the ChatML rendering (SmolLM2's chat template) of exactly those
messages, and llama.cpp's ``timings.cache_n`` shows the previous prompt and its reply served from
its prompt cache on turns 2 and 3 (a history with other reply text would stop the reuse where the
reply starts).
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # the template's default


def _chatml(messages: list[dict[str, str]]) -> str:
    """SmolLM2's chat template (chat_template.jinja) with its default system message."""
    text = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    for m in messages:
        text += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def session_run(tmp_path_factory, embedded_gguf, smollm2_tokenizer):
    """Its own launch: turn 1's cache_n of 0 needs slots no other module's chat prompt (with the
    same chat template) has filled."""
    out = tmp_path_factory.mktemp("e2e") / "sessions"
    cmd = [sys.executable, "-m", "tokenbench", "run", "--multi-turn", "--turns", "3", "--users", "1"]
    cmd += ["--num-prompts", "1", "--input-tokens", "32", "--output-tokens", "16", "--keep-text"]
    cmd += ["--tokenizer", str(smollm2_tokenizer), "--out", str(out), "--no-live"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_turn_three_carries_turns_one_and_two_and_both_real_replies(session_run, smollm2_tokenizer):
    from tokenbench.config import DatasetConfig, SessionConfig
    from tokenbench.datasets.sessions import build_conversations
    from tokenbench.datasets.tokenizers import HFTokenizer

    records = [json.loads(line) for line in (session_run / "records.jsonl").read_text().splitlines()]
    assert [(r["turn_index"], r["outcome"]) for r in records] == [(0, "ok"), (1, "ok"), (2, "ok")]
    assert len({r["session_id"] for r in records}) == 1
    tokenizer = HFTokenizer(smollm2_tokenizer)
    # the run's one conversation, rebuilt from the same settings and seed
    (conversation,), _ = build_conversations(
        DatasetConfig(input_tokens=32, output_tokens=16, num_prompts=1), SessionConfig(turns=3), tokenizer, 0
    )
    messages: list[dict[str, str]] = []
    history = 0
    for turn, record in zip(conversation.turns, records):
        messages.append({"role": "user", "content": turn.text})
        assert record["history_tokens"] == history
        assert record["prompt_tokens"] == tokenizer.count(_chatml(messages))
        reply = record["output_text"]
        assert reply  # the streamed text, kept with --keep-text
        messages.append({"role": "assistant", "content": reply})
        history += turn.tokens + tokenizer.count(reply)
    assert len(messages) == 6 and [m["role"] for m in messages[:5]] == ["user", "assistant"] * 2 + ["user"]


def test_llamacpp_prompt_cache_reuses_the_history(session_run):
    records = [json.loads(line) for line in (session_run / "records.jsonl").read_text().splitlines()]
    cached = [r["server_timings"]["cache_n"] for r in records]
    assert cached[0] == 0
    for before, record in zip(records, records[1:]):
        # the previous prompt and all of its reply but the last token (generated, never fed back)
        assert record["server_timings"]["cache_n"] >= before["prompt_tokens"] + before["output_tokens"] - 2
    results = json.loads((session_run / "results.json").read_text())
    point = results["points"][0]
    assert [t["count"] for t in point["by_turn"]] == [1, 1, 1]
    assert point["sessions"]["completed"] == 1 and point["sessions"]["started"] == 1
