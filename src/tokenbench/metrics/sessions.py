"""Multi-turn session metrics (``--multi-turn``): per turn index, and the reuse a prefix cache could
get from the sessions' histories. Pure functions of records.

Population: ``by_turn`` takes the point's window population (the records its own distributions
are over: metrics.point); TTFT, E2E and prompt tokens are over its ok records, as the point's are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from tokenbench.metrics.point import prompt_tokens
from tokenbench.metrics.stats import distribution
from tokenbench.records import RequestRecord
from tokenbench.results import TurnStats


def by_turn(population: Iterable[RequestRecord]) -> list[TurnStats]:
    """One entry per turn index present, in order: its count (every outcome) and its ok requests'
    TTFT, E2E and prompt tokens (the server's where given, else the dataset's)."""
    turns: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in population:
        if r.session is not None and r.session.turn_index is not None:
            turns[r.session.turn_index].append(r)
    out = []
    for index in sorted(turns):
        records = turns[index]
        ok = [r for r in records if r.ok]
        prompts = [n for n in (prompt_tokens(r)[0] for r in ok) if n is not None]
        out.append(
            TurnStats(
                turn_index=index,
                count=len(records),
                ttft_s=distribution(t for t in (r.ttft_s for r in ok) if t is not None),
                e2e_s=distribution(t for t in (r.e2e_s for r in ok) if t is not None),
                prompt_tokens=distribution(prompts),
            )
        )
    return out


def session_expected_reuse(records: Iterable[RequestRecord], point: Iterable[RequestRecord] = ()) -> float | None:
    """The fraction of the ok session records' prompt tokens an ideal prefix cache would reuse:
    each turn's prefix cached by the conversation's previous turn. That is the previous turn's
    prompt and reply as the server counted them, less the reply's last token (sampled, never fed
    back; llama.cpp's ``timings.cache_n`` is exactly this), capped at the turn's prompt, where the
    previous turn is among ``point``'s records (the whole point; ``records`` may be its window
    population) with the server's counts; else the turn's ``history_tokens`` (text only: without
    the chat template's tokens, so a little under). Prompt tokens are the server's where given,
    else the dataset's. A shared system prompt reused across conversations is not counted.
    None without any session record."""
    earlier = {
        (s.session_id, s.turn_index): r
        for r in point
        if (s := r.session) is not None and s.session_id is not None and r.ok
    }
    reused = prompt = 0
    for r in records:
        s = r.session
        if not r.ok or s is None or s.session_id is None or s.history_tokens is None:
            continue
        n = prompt_tokens(r)[0]
        if n is None:
            continue
        prev = earlier.get((s.session_id, (s.turn_index or 0) - 1)) if s.turn_index else None
        if prev is not None and prev.prompt_tokens is not None and prev.output_tokens:
            reused += min(n, prev.prompt_tokens + prev.output_tokens - 1)
        else:
            reused += min(n, s.history_tokens)
        prompt += n
    return reused / prompt if prompt > 0 else None
