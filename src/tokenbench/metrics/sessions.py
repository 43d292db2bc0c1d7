"""Multi-turn session metrics (``--multi-turn``): per turn index, and the reuse a prefix cache could
get from the sessions' histories. Pure functions of records.

Population: ``by_turn`` takes the point's window population (the records its own distributions
are over: metrics.point); TTFT, E2E and prompt tokens are over its ok records, as the point's are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..records import RequestRecord
from ..results import TurnStats
from .point import prompt_tokens
from .stats import distribution


def by_turn(population: Iterable[RequestRecord]) -> list[TurnStats]:
    """One entry per turn index present, in order: its count (every outcome) and its ok requests'
    TTFT, E2E and prompt tokens (the server's where given, else the dataset's)."""
    turns: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in population:
        if r.turn_index is not None:
            turns[r.turn_index].append(r)
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


def session_expected_reuse(records: Iterable[RequestRecord]) -> float | None:
    """sum(history_tokens) / sum(prompt tokens) over the ok session records: the fraction of the
    prompts an ideal prefix cache would reuse (each turn's history was the previous prompt plus
    its reply). Prompt tokens are the server's where given, else the dataset's. None without any."""
    history = prompt = 0
    for r in records:
        if not r.ok or r.session_id is None or r.history_tokens is None:
            continue
        n = prompt_tokens(r)[0]
        if n is None:
            continue
        history += r.history_tokens
        prompt += n
    return history / prompt if prompt > 0 else None
