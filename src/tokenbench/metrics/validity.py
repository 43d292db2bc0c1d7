"""Structured output and tool calls over a point's population ( structured.py checks
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
    asked = [r for r in population if r.structured is not None]
    if asked:
        checked = [r for r in asked if r.outcome is Outcome.OK and r.output_valid is not None]
        parsed = [r.output_parsed for r in checked if r.output_parsed is not None]
        valid = sum(1 for r in checked if r.output_valid)
        kinds = sorted({r.structured for r in asked if r.structured})
        out["structured"] = StructuredOutput(
            kind=",".join(kinds),
            requests=len(asked),
            checked=len(checked),
            parsed=sum(parsed) if parsed else None,
            valid=valid,
            valid_fraction=valid / len(checked) if checked else None,
        )
    offered = [r for r in population if r.tool_calls is not None and r.outcome is Outcome.OK]
    if any(r.tool_calls is not None for r in population):
        called = [r for r in offered if r.tool_calls]
        parsed_ok = sum(1 for r in called if r.tool_args_parsed)
        tokens = [r.tool_args_tokens for r in called if r.tool_args_tokens is not None]
        out["tool_calls"] = ToolCalls(
            requests=len(offered),
            with_calls=len(called),
            calls=sum(r.tool_calls or 0 for r in called),
            args_parsed=parsed_ok,
            args_parsed_fraction=parsed_ok / len(called) if called else None,
            call_chunks=sum(r.tool_call_chunks for r in offered),
            args_tokens=sum(tokens) if tokens else None,
        )
        out["ttftc_s"] = distribution(t for t in (r.ttftc_s for r in called) if t is not None)
    return out
