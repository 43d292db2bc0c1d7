"""mock.py: the scripted server's wire, as a client reads it. Chunk counts from max_tokens and
tokens_per_chunk, the role-only first chat chunk, each fault's shape, /mock/deliveries' fields,
capacity queueing, /metrics under vLLM's names (read through the vLLM profile's mapping), and
speculative decoding as vLLM streams it (each chunk one verify step) with its per-request metrics
object and speculation counters."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import aiohttp
import pytest

from tokenbench.backends.vllm import METRICS
from tokenbench.telemetry.prom import flat, normalize, parse

FAST = dict(ttft_ms=0, itl_ms=0)
CHAT = {"model": "mock-model", "messages": [{"role": "user", "content": "say hi"}], "stream": True}


async def _apost(url: str, path: str = "/v1/chat/completions", **body) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, json={**CHAT, **body}) as resp:
            return resp.status, await resp.text()


def _post(url: str, path: str = "/v1/chat/completions", **body) -> tuple[int, str]:
    """The mock serves from its own thread and loop; the client runs in a loop of its own."""
    return asyncio.run(_apost(url, path, **body))


def _concurrently(url: str, n: int, **body) -> None:
    async def all_at_once() -> None:
        await asyncio.gather(*(_apost(url, **body) for _ in range(n)))

    asyncio.run(all_at_once())


def _get(url: str, path: str) -> tuple[int, str]:
    async def get() -> tuple[int, str]:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + path) as resp:
                return resp.status, await resp.text()

    return asyncio.run(get())


def _read_until_error(url: str, max_tokens: int, timeout_s: float) -> tuple[bytes, BaseException | None]:
    """What arrived before the stream broke (or stalled past ``timeout_s``), and how it broke."""

    async def read() -> tuple[bytes, BaseException | None]:
        received = b""
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": max_tokens}) as resp:
                try:
                    async with asyncio.timeout(timeout_s):
                        async for chunk in resp.content.iter_any():
                            received += chunk
                except (aiohttp.ClientPayloadError, TimeoutError) as exc:
                    return received, exc
        return received, None

    return asyncio.run(read())


def _events(text: str) -> list:
    """Each ``data:`` event: parsed JSON, or the raw text when it is not JSON ([DONE], malformed)."""
    out = []
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        data = block.removeprefix("data: ")
        try:
            out.append(json.loads(data))
        except json.JSONDecodeError:
            out.append(data)
    return out


def _contents(events: list) -> list[str]:
    return [e["choices"][0]["delta"]["content"] for e in events[1:] if isinstance(e, dict) and _is_content(e)]


def _is_content(e: dict) -> bool:
    return bool(e.get("choices")) and e["choices"][0].get("delta", {}).get("content") not in (None, "")


def test_chat_stream_role_then_scripted_chunks_finish_usage_done(mock_server):
    url = mock_server(**FAST)
    status, text = _post(url, max_tokens=5)
    assert status == 200
    events = _events(text)
    assert events[0]["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
    assert events[0]["object"] == "chat.completion.chunk" and events[0]["model"] == "mock-model"
    assert _contents(events) == [" hi"] * 5
    assert events[6]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    assert events[7]["choices"] == [] and events[7]["usage"]["completion_tokens"] == 5
    assert events[8] == "[DONE]" and len(events) == 9
    assert len({e["id"] for e in events[:8]}) == 1


def test_completions_tokens_per_chunk_and_default_output_tokens(mock_server):
    url = mock_server(**FAST, tokens_per_chunk=2, output_tokens=4, word="yo")
    _, text = _post(url, "/v1/completions", prompt="a b c", max_tokens=5, messages=None)
    events = _events(text)
    assert events[0]["object"] == "text_completion"
    texts = [e["choices"][0]["text"] for e in events if isinstance(e, dict) and e["choices"]]
    assert texts == [" yo yo"] * 3 + [""]  # ceil(5 / 2) chunks, no role chunk, then the finish
    assert events[-2]["usage"]["completion_tokens"] == 6
    _, text = _post(url, "/v1/completions", prompt="p", messages=None)  # no max_tokens: output_tokens
    assert len([e for e in _events(text) if isinstance(e, dict) and e["choices"] and e["choices"][0]["text"]]) == 2


@pytest.mark.parametrize("status", [500, 429, 400])
def test_http_faults(mock_server, status):
    url = mock_server(**FAST, fault=f"http_{status}")
    got, text = _post(url)
    assert got == status
    assert json.loads(text) == {"error": {"message": f"scripted http_{status}", "code": status}}


def test_fault_every_second_request(mock_server):
    url = mock_server(**FAST, fault="http_500", fault_every=2)
    assert [(_post(url, max_tokens=1))[0] for _ in range(4)] == [200, 500, 200, 500]


@pytest.mark.parametrize(
    ("fault", "odd_one"),
    [("malformed", "{this is not json"), ("error_event", {"error": {"message": "scripted error event"}})],
)
def test_mid_stream_bad_event_after_n_chunks_then_the_rest(mock_server, fault, odd_one):
    url = mock_server(**FAST, fault=fault, fault_after_chunks=2)
    _, text = _post(url, max_tokens=4)
    events = _events(text)
    assert events[3] == odd_one  # role, 2 content chunks, the bad event
    assert _contents(events) == [" hi"] * 4
    assert events[-1] == "[DONE]"


def test_abort_ends_with_finish_abort_usage_and_done(mock_server):
    url = mock_server(**FAST, fault="abort", fault_after_chunks=3)
    _, text = _post(url, max_tokens=10)
    events = _events(text)
    assert _contents(events) == [" hi"] * 3
    assert events[4]["choices"][0]["finish_reason"] == "abort"
    assert events[5]["usage"] == {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}
    assert events[6:] == ["[DONE]"]


def test_no_content_is_role_finish_usage_done(mock_server):
    url = mock_server(**FAST, fault="no_content")
    _, text = _post(url, max_tokens=10)
    events = _events(text)
    assert _contents(events) == []
    assert [e["choices"][0]["finish_reason"] if isinstance(e, dict) and e["choices"] else e for e in events[:2]] == [
        None,
        "length",
    ]
    assert events[2]["usage"]["completion_tokens"] == 0 and events[3] == "[DONE]" and len(events) == 4


def test_no_end_closes_cleanly_without_finish_or_done(mock_server):
    url = mock_server(**FAST, fault="no_end")
    _, text = _post(url, max_tokens=3)
    events = _events(text)
    assert _contents(events) == [" hi"] * 3 and len(events) == 4
    assert all(e["choices"][0]["finish_reason"] is None for e in events)


def test_disconnect_drops_the_connection_after_n_chunks(mock_server):
    url = mock_server(**FAST, fault="disconnect", fault_after_chunks=2)
    received, error = _read_until_error(url, 10, timeout_s=5)
    assert isinstance(error, aiohttp.ClientPayloadError)
    assert _contents(_events(received.decode())) == [" hi"] * 2


def test_stall_holds_the_connection_after_n_chunks(mock_server):
    url = mock_server(**FAST, fault="stall", fault_after_chunks=1)
    received, error = _read_until_error(url, 10, timeout_s=0.3)
    assert isinstance(error, TimeoutError)  # open, and silent
    assert _contents(_events(received.decode())) == [" hi"]


def test_deliveries_log_what_was_written(mock_server):
    url = mock_server(ttft_ms=20, itl_ms=5, fault="abort", fault_every=2, fault_after_chunks=1)
    _post(url, max_tokens=3)
    _post(url, max_tokens=3)
    deliveries = json.loads(_get(url, "/mock/deliveries")[1])
    assert set(deliveries) == {"mock-1", "mock-2"}
    ok, aborted = deliveries["mock-1"], deliveries["mock-2"]
    assert set(ok) == {"received_s", "admitted_s", "wait_s", "chunk_times_s", "fault", "finished_s"} | {
        "headers",
        "messages",
        "prompt",
        "images",  # images: image_url parts counted
        "model",
        "priority",
        "traceparent",  # server spans: the request's W3C traceparent (None: it sent none)
        "replica",  # --replicas-script: the scripted replica that served it (None: none)
        "diverged_at",  # --diverge-*: the output token its reply differs from (None: the usual reply)
    }
    assert ok["headers"] is None  # logged only with record_requests
    assert ok["fault"] is None and aborted["fault"] == "abort"
    assert len(ok["chunk_times_s"]) == 3 and len(aborted["chunk_times_s"]) == 1
    assert ok["admitted_s"] == pytest.approx(ok["received_s"] + ok["wait_s"]) and ok["wait_s"] >= 0
    for i, t in enumerate(ok["chunk_times_s"]):  # never before its scripted time
        assert t >= ok["admitted_s"] + 0.020 + i * 0.005
    assert ok["finished_s"] >= ok["chunk_times_s"][-1]
    assert aborted["received_s"] >= ok["finished_s"]  # sent one after the other
    assert aborted["finished_s"] >= aborted["chunk_times_s"][-1]


def test_max_streams_queues_fifo_and_metrics_speak_vllm(mock_server):
    url = mock_server(ttft_ms=100, itl_ms=0, max_streams=1)
    _concurrently(url, 2, max_tokens=2)
    deliveries = json.loads(_get(url, "/mock/deliveries")[1])
    fields = normalize(parse(_get(url, "/metrics")[1]), METRICS)
    first, second = sorted(deliveries.values(), key=lambda d: d["admitted_s"])
    assert second["admitted_s"] >= first["finished_s"]  # one slot: the second waited for the first
    assert second["wait_s"] > 0
    assert fields["running"] == 0 and fields["waiting"] == 0
    assert fields["generated_tokens"] == 4
    assert fields["preemptions"] == 0
    assert fields["ttft_count"] == 2 and fields["ttft_sum_s"] >= 0.2  # from arrival: 0.1 each at least
    assert "kv_usage" not in fields  # the mock does not report one: absent, never 0


def test_kv_slots_count_preemptions(mock_server):
    url = mock_server(ttft_ms=200, itl_ms=0, kv_slots=1)
    _concurrently(url, 3, max_tokens=1)
    fields = normalize(parse(_get(url, "/metrics")[1]), METRICS)
    assert fields["preemptions"] == 2  # the 2nd and 3rd arrived above one in flight


def test_health_models_and_tokenize(mock_server):
    url = mock_server(model="m1")
    assert json.loads(_get(url, "/health")[1]) == {"status": "ok"}
    (card,) = json.loads(_get(url, "/v1/models")[1])["data"]
    assert card == {"id": "m1", "object": "model", "created": card["created"], "owned_by": "mock"}
    status, text = _post(url, "/tokenize", prompt="one two three", messages=None)
    assert (status, json.loads(text)) == (200, {"tokens": [0, 1, 2], "count": 3})


def test_mock_prefix_cache_hits_whole_blocks_of_a_seen_prefix_and_never_the_last_token():
    from tokenbench.mock import PrefixCache

    cache = PrefixCache(4)
    assert cache.lookup(list("abcdefgh")) == 0  # cold
    assert cache.lookup(list("abcdefgh")) == 4  # the second block ends on the last token: computed
    assert cache.lookup(list("abcdefghi")) == 8
    assert cache.lookup(list("abcdXfghi")) == 4  # nothing after the first miss
    assert cache.lookup(list("zbcdefghi")) == 0  # a block hits only with its whole prefix
    assert PrefixCache.tokens({"prompt": [1, 2, 3]}) == [1, 2, 3]
    assert PrefixCache.tokens({"prompt": "x y z"}) == ["x", "y", "z"]
    cache.reset()
    assert cache.lookup(list("abcdefghi")) == 0


# Speculative decoding (spec_tokens k > 0) and vLLM's per-request metrics object.
USAGE = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
TIMING = ["time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second"]


def _final(events: list) -> dict:
    """The final usage chunk: empty choices, the usage (and vLLM's metrics object when sent)."""
    (final,) = [e for e in events if isinstance(e, dict) and not e["choices"]]
    return final


def _chunk_tokens(events: list) -> list[int]:
    """Each content chunk's tokens, from the usage on every chunk (continuous_usage_stats): each
    checked against the words its text carries."""
    chunks = [e for e in events if isinstance(e, dict) and _is_content(e)]
    so_far = [0] + [e["usage"]["completion_tokens"] for e in chunks]
    tokens = [b - a for a, b in itertools.pairwise(so_far)]
    assert [len(e["choices"][0]["delta"]["content"].split()) for e in chunks] == tokens
    return tokens


def _spec(accepted: list[int], k: int) -> dict:
    """The speculative_decoding object vLLM reports for verify steps that accepted ``accepted``."""
    hist = [accepted.count(j) for j in range(k + 1)]
    steps, hits = len(accepted), sum(accepted)
    return {
        "mean_acceptance_length": 1 + hits / steps if steps else 1.0,
        "draft_acceptance_rate": hits / (steps * k) if steps else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": hits,
        "num_draft_tokens": steps * k,
        "num_spec_tokens": k,
        "per_step_accepted": accepted,
        "per_step_drafted": [k] * steps,
    }


@pytest.mark.parametrize(
    ("k", "accept", "max_tokens", "tokens", "accepted"),
    [
        # vLLM 0.32 observed: 24 tokens at k = 3, all accepted: 6 steps, the last cut to 3 tokens
        (3, "", 24, [1, 4, 4, 4, 4, 4, 3], [3] * 6),
        # a 0-accept step (the bonus alone), and the last step's 3 accepted cut to the 1 token left
        (3, "3,1,0,2", 12, [1, 4, 2, 1, 3, 1], [3, 1, 0, 2, 3]),
        (2, "0", 4, [1, 1, 1, 1], [0, 0, 0]),  # nothing accepted: one token a step
        (4, "2", 1, [1], []),  # the prefill's token only: no step
    ],
)
def test_speculation_chunks_carry_each_steps_accepted_drafts_plus_the_bonus(
    mock_server, k, accept, max_tokens, tokens, accepted
):
    # tokens_per_chunk is ignored under speculation
    url = mock_server(**FAST, spec_tokens=k, spec_accept=accept, spec_metrics="detailed", tokens_per_chunk=5)
    events = _events(_post(url, max_tokens=max_tokens, **USAGE)[1])
    assert _chunk_tokens(events) == tokens
    final = _final(events)
    assert final["usage"]["completion_tokens"] == max_tokens
    assert final["metrics"] == {"speculative_decoding": _spec(accepted, k)}  # no timing without per_request_metrics


def test_speculation_on_completions_and_summary_leaves_out_the_steps(mock_server):
    url = mock_server(**FAST, spec_tokens=2, spec_accept="2,1", spec_metrics="summary", word="yo")
    _, text = _post(url, "/v1/completions", prompt="p", max_tokens=9, messages=None, **USAGE)
    events = _events(text)
    texts = [e["choices"][0]["text"] for e in events if isinstance(e, dict) and e["choices"]]
    assert texts == [" yo", " yo yo yo", " yo yo", " yo yo yo", ""]  # 1, then 2 + 1, 1 + 1, 2 + 1; the finish
    spec = _spec([2, 1, 2], 2)
    del spec["per_step_accepted"], spec["per_step_drafted"]
    assert _final(events)["metrics"] == {"speculative_decoding": spec}


def test_per_request_metrics_are_what_the_deliveries_log_says_was_written(mock_server):
    """vLLM's timing fields, in its order: queue = admitted - received (here the wait for the one
    slot), prefill to the first chunk written, generation from it to the last, mean ITL over the
    tokens after the first, tokens/s from admission: the same clock readings as /mock/deliveries."""
    url = mock_server(ttft_ms=20, itl_ms=10, max_streams=1, spec_tokens=3, spec_accept="1", per_request_metrics=True)

    async def two_at_once() -> list[tuple[int, str]]:
        return await asyncio.gather(*(_apost(url, max_tokens=9, **USAGE) for _ in range(2)))

    replies = [_events(text) for _, text in asyncio.run(two_at_once())]
    deliveries = json.loads(_get(url, "/mock/deliveries")[1])
    assert max(d["wait_s"] for d in deliveries.values()) > 0  # one waited for the other's reply
    for events in replies:
        final = _final(events)
        d, metrics = deliveries[final["id"]], final["metrics"]
        assert list(metrics) == TIMING  # spec_metrics "none": no speculative_decoding
        times, admitted = d["chunk_times_s"], d["admitted_s"]
        assert _chunk_tokens(events) == [1, 2, 2, 2, 2]
        assert metrics["queue_time_ms"] == pytest.approx(d["wait_s"] * 1e3, abs=1e-6)
        assert metrics["time_to_first_token_ms"] == pytest.approx((times[0] - admitted) * 1e3, abs=1e-6)
        assert metrics["time_to_first_token_ms"] >= 20  # never before the scripted TTFT
        assert metrics["generation_time_ms"] == pytest.approx((times[-1] - times[0]) * 1e3, abs=1e-6)
        # the last of 5 chunks never before its scripted time (a late first chunk shortens the gap after it)
        assert metrics["time_to_first_token_ms"] + metrics["generation_time_ms"] >= 20 + 4 * 10 - 1e-6
        assert metrics["mean_itl_ms"] == pytest.approx(metrics["generation_time_ms"] / 8)
        assert metrics["tokens_per_second"] == pytest.approx(9 / (times[-1] - admitted))


def test_per_request_metrics_without_speculation_and_one_token(mock_server):
    url = mock_server(**FAST, per_request_metrics=True, spec_metrics="detailed")  # no spec_tokens: no figures
    metrics = _final(_events(_post(url, max_tokens=1, **USAGE)[1]))["metrics"]
    assert list(metrics) == TIMING
    assert metrics["mean_itl_ms"] is None and metrics["generation_time_ms"] == 0  # one token: no gap


def test_no_metrics_object_without_include_usage_or_without_being_asked(mock_server):
    url = mock_server(**FAST, spec_tokens=3, per_request_metrics=True, spec_metrics="detailed")
    final = _final(_events(_post(url, max_tokens=8)[1]))  # no stream_options: vLLM sends no metrics
    assert "metrics" not in final and final["usage"]["completion_tokens"] == 8
    url = mock_server(**FAST, spec_tokens=3)  # neither asked for
    final = _final(_events(_post(url, max_tokens=8, **USAGE)[1]))
    assert "metrics" not in final and final["usage"]["completion_tokens"] == 8


def _spec_counters(url: str) -> dict[str, float]:
    samples = flat(parse(_get(url, "/metrics")[1]))
    return {key: value for key, value in samples.items() if key.startswith("vllm:spec_decode")}


def test_spec_decode_counters_are_the_sum_over_replies(mock_server):
    url = mock_server(**FAST, spec_tokens=3, spec_accept="3,1,0,2")
    _post(url, max_tokens=12)  # steps accept 3, 1, 0, 2, 3
    _post(url, max_tokens=5)  # 3
    model = 'model_name="mock-model"'
    assert _spec_counters(url) == {
        f"vllm:spec_decode_num_drafts_total{{{model}}}": 6,
        f"vllm:spec_decode_num_draft_tokens_total{{{model}}}": 18,
        f"vllm:spec_decode_num_accepted_tokens_total{{{model}}}": 12,
        # accepted at draft position i: the steps that accepted more than i
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="0"}}': 5,
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="1"}}': 4,
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="2"}}': 3,
    }
    assert normalize(parse(_get(url, "/metrics")[1]), METRICS)["generated_tokens"] == 17


def test_spec_decode_counters_count_each_step_as_it_is_written(mock_server):
    url = mock_server(**FAST, spec_tokens=2, fault="stall", fault_after_chunks=3)
    received, error = _read_until_error(url, 10, timeout_s=0.3)
    assert isinstance(error, TimeoutError)  # held open after chunks 0, 1 and 2: two steps
    assert _spec_counters(url)['vllm:spec_decode_num_drafts_total{model_name="mock-model"}'] == 2
    assert _contents(_events(received.decode())) == [" hi", " hi hi hi", " hi hi hi"]


def test_no_speculation_changes_nothing(mock_server):
    """spec_tokens 0: the stream is byte for byte a default mock's (bar its timestamp), and
    /metrics has no speculation counters; a metrics object only when per_request_metrics asks."""
    plain, asked = mock_server(**FAST), mock_server(**FAST, spec_metrics="detailed")
    streams = [_events(_post(url, max_tokens=6, **USAGE)[1]) for url in (plain, asked)]
    for events in streams:
        for e in events:
            if isinstance(e, dict):
                e.pop("created")
    assert streams[0] == streams[1]
    assert _chunk_tokens(streams[0]) == [1] * 6 and "metrics" not in _final(streams[0])
    assert _spec_counters(plain) == {} == _spec_counters(asked)


@pytest.mark.parametrize("fault", ["none", "no_content"])
def test_the_opening_chunk_rides_with_the_first_token_as_vllm_sends_it(mock_server, fault):
    """--opening-chunk with-first-token: the same events, the role-only chunk written with the
    first content chunk (the first byte back waits for the prefill), or before the end of a reply
    without content."""
    url = mock_server(ttft_ms=60, itl_ms=1, opening_chunk="with-first-token", fault=fault)

    async def first_byte() -> tuple[float, str]:
        async with aiohttp.ClientSession() as session:
            t0 = time.perf_counter()
            async with session.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": 3}) as resp:
                await resp.content.readany()
                waited = time.perf_counter() - t0
                return waited, await resp.text()

    waited, _ = asyncio.run(first_byte())
    _, text = _post(url, max_tokens=3)
    events = _events(text)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert _contents(events) == ([" hi"] * 3 if fault == "none" else [])
    if fault == "none":
        assert waited >= 0.05  # nothing before the first token
