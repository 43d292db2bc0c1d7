"""mock/scaler.py: the scripted scaler's script, its capacity (slots per RUNNING replica), the
replica each reply names, its Ray Serve-shaped answer and its own log of transitions."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from tokenbench.mock.scaler import ScriptStep, parse_script
from tokenbench.mock.settings import MockSettings
from tokenbench.telemetry.scaler import ray_serve_replicas

# Serial (run alone): the script's transitions are checked to 30 ms of its times.
pytestmark = pytest.mark.serial

CHAT = {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 5}


def test_a_script_is_steps_from_zero_with_rising_times():
    assert parse_script("0:1, 4:2,12:1") == (ScriptStep(0, 1), ScriptStep(4, 2), ScriptStep(12, 1))
    for bad, says in (("1:1", "start at 0"), ("0:1,4:2,3:1", "rise"), ("0:x", "SECONDS:REPLICAS"), ("", "start")):
        with pytest.raises(ValueError, match=says):
            parse_script(bad)


def test_a_script_needs_slots_per_replica():
    with pytest.raises(ValueError, match="--max-streams"):
        MockSettings(replicas_script="0:1")


async def _chat(session: aiohttp.ClientSession, url: str) -> tuple[str | None, float]:
    async with session.post(url + "/v1/chat/completions", json=CHAT) as resp:
        await resp.read()
        return resp.headers.get("x-served-by"), time.perf_counter()


async def _get(session: aiohttp.ClientSession, url: str, path: str) -> dict:
    async with session.get(url + path) as resp:
        return json.loads(await resp.text())


def test_capacity_follows_the_script_and_replies_name_their_replica(mock_server):
    """One replica of 2 slots, a second STARTING at 0.3 s and RUNNING 0.2 s later: 4 requests at
    once, 100 ms each, are served 2 at a time by replica-1 until replica-2 runs."""
    url = mock_server(ttft_ms=100, itl_ms=0, max_streams=2, replicas_script="0:1,0.3:2", replica_startup_s=0.2)

    async def scenario() -> tuple[list, dict, dict, dict]:
        async with aiohttp.ClientSession() as session:
            before = await _get(session, url, "/mock/replicas")
            first = await asyncio.gather(*(_chat(session, url) for _ in range(4)))
            await asyncio.sleep(0.15)  # two rounds took 0.2 s: 0.35 s into the script, replica-2 STARTING
            starting = await _get(session, url, "/mock/replicas")
            await asyncio.sleep(0.3)
            later = await asyncio.gather(*(_chat(session, url) for _ in range(4)))
            log = await _get(session, url, "/mock/replica-log")
            return [*first, *later], before, starting, log

    replies, before, starting, log = asyncio.run(scenario())
    assert [r for r, _ in replies[:4]] == ["replica-1"] * 4  # one replica, 2 slots: two rounds
    assert sorted(r for r, _ in replies[4:]) == ["replica-1", "replica-1", "replica-2", "replica-2"]
    assert [(r.id, r.state) for r in ray_serve_replicas(before).replicas] == [("replica-1", "RUNNING")]
    view = ray_serve_replicas(starting)
    assert [(r.id, r.state) for r in view.replicas] == [("replica-1", "RUNNING"), ("replica-2", "STARTING")]
    assert view.desired == 2
    times = {(t["replica"], t["state"]): t["at_s"] for t in log["transitions"]}
    assert times[("replica-2", "STARTING")] - log["origin_s"] == pytest.approx(0.3, abs=0.03)
    assert times[("replica-2", "RUNNING")] - times[("replica-2", "STARTING")] == pytest.approx(0.2, abs=0.03)
    deliveries = asyncio.run(_deliveries(url))
    assert sorted({d["replica"] for d in deliveries.values()}) == ["replica-1", "replica-2"]


async def _deliveries(url: str) -> dict:
    async with aiohttp.ClientSession() as session:
        return await _get(session, url, "/mock/deliveries")


def test_a_fall_stops_the_newest_replica_once_its_requests_end(mock_server):
    url = mock_server(ttft_ms=200, itl_ms=0, max_streams=1, replicas_script="0:2,0.1:1")

    async def scenario() -> tuple[dict, dict, dict]:
        async with aiohttp.ClientSession() as session:
            pending = [asyncio.create_task(_chat(session, url)) for _ in range(2)]
            await asyncio.sleep(0.15)  # both replicas busy; replica-2 is STOPPING, draining its request
            stopping = await _get(session, url, "/mock/replicas")
            await asyncio.gather(*pending)
            after = await _get(session, url, "/mock/replicas")
            return stopping, after, await _get(session, url, "/mock/replica-log")

    stopping, after, log = asyncio.run(scenario())
    assert [(r.id, r.state) for r in ray_serve_replicas(stopping).replicas] == [
        ("replica-1", "RUNNING"),
        ("replica-2", "STOPPING"),
    ]
    assert [r.id for r in ray_serve_replicas(after).replicas] == ["replica-1"]
    states = [(t["replica"], t["state"]) for t in log["transitions"]]
    assert states[-2:] == [("replica-2", "STOPPING"), ("replica-2", "STOPPED")]


def test_without_a_script_there_is_no_replica_answer(mock_server):
    url = mock_server()

    async def get() -> int:
        async with aiohttp.ClientSession() as session, session.get(url + "/mock/replicas") as resp:
            return resp.status

    assert asyncio.run(get()) == 404


def test_with_a_priority_queue_waiters_are_admitted_lower_priority_first(mock_server):
    url = mock_server(ttft_ms=100, itl_ms=0, max_streams=1, replicas_script="0:1", priority_queue=True)

    async def scenario() -> list[float]:
        async with aiohttp.ClientSession() as session:

            async def chat(priority: int, after_s: float) -> float:
                await asyncio.sleep(after_s)
                async with session.post(url + "/v1/chat/completions", json={**CHAT, "priority": priority}) as resp:
                    await resp.read()
                    return time.perf_counter()

            return await asyncio.gather(chat(0, 0), chat(5, 0.02), chat(1, 0.04))

    _, low, high = asyncio.run(scenario())
    assert high < low  # priority 1 waited less than priority 5, which came first
