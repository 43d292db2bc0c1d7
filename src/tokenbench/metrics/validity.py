"""Structured output and tool calls over a point's population (clients/structured.py checks
each reply, the client records it).

    valid_fraction = valid / checked

``checked``: the successful requests of the population that asked for a constraint the client can
check (json_object, json_schema, choice, regex; a grammar's replies are not checked); ``valid``:
of them, the replies that met it (a JSON schema: parsed and validated by ``jsonschema``). A failed
request is not in it (it counts in error_rate), and a reply cut short by max_tokens is (it is
invalid JSON: raise --output-tokens to see the constraint alone).

With --tools: ``ttftc_s`` = first_tool_call_s - sent_s (time to the first tool-call token) over
the successful requests whose reply made a call; ``args_parsed_fraction`` = replies whose every
call's arguments parsed as a JSON object / replies with calls. Added to a point only when some
request of its population asked for structure / offered tools: a run without keeps its shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenbench.metrics.stats import distribution
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results.run import StructuredOutput, ToolCalls


def validity_metrics(population: Sequence[RequestRecord]) -> dict[str, Any]:
    """``structured``, ``tool_calls`` and ``ttftc_s`` of a point (PointMetrics' fields), each only
    when some request of the population asked for it."""
    out: dict[str, Any] = {}
    asked = [(r, c) for r in population if (c := r.output_check) is not None and c.structured is not None]
    if asked:
        checked = [c for r, c in asked if r.outcome is Outcome.OK and c.output_valid is not None]
        parsed = [c.output_parsed for c in checked if c.output_parsed is not None]
        valid = sum(1 for c in checked if c.output_valid)
        kinds = sorted({c.structured for _, c in asked if c.structured})
        out["structured"] = StructuredOutput(
            kind=",".join(kinds),
            requests=len(asked),
            checked=len(checked),
            parsed=sum(parsed) if parsed else None,
            valid=valid,
            valid_fraction=valid / len(checked) if checked else None,
        )
    used = [(r, u) for r in population if (u := r.tool_use) is not None and u.tool_calls is not None]
    if used:
        offered = [(r, u) for r, u in used if r.outcome is Outcome.OK]
        called = [(r, u) for r, u in offered if u.tool_calls]
        parsed_ok = sum(1 for _, u in called if u.tool_args_parsed)
        tokens = [u.tool_args_tokens for _, u in called if u.tool_args_tokens is not None]
        out["tool_calls"] = ToolCalls(
            requests=len(offered),
            with_calls=len(called),
            calls=sum(u.tool_calls or 0 for _, u in called),
            args_parsed=parsed_ok,
            args_parsed_fraction=parsed_ok / len(called) if called else None,
            call_chunks=sum(u.tool_call_chunks for _, u in offered),
            args_tokens=sum(tokens) if tokens else None,
        )
        out["ttftc_s"] = distribution(t for t in (r.ttftc_s for r, _ in called) if t is not None)
    return out
