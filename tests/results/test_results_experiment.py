"""experiment.json as types (results/experiment.py): the file round-trips to the same JSON, rows
are replaced by label, a key the types do not declare is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tokenbench.results import CellRow, Experiment, ServerRow

STATE = {
    "name": "e",
    "description": "",
    "spec": {"name": "e", "trials": 2},
    "tool": {"name": "tokenbench", "version": "0.2.1"},
    "created_unix_s": 1.5,
    "servers": [{"label": "s", "backend": "vllm", "swept": {}, "status": "failed", "error": "no"}],
    "cells": {
        "s__default__t1": {
            "server": "s",
            "variant": "default",
            "trial": 1,
            "status": "ok",
            "error": None,
            "run_dir": "cells/s__default__t1",
            "wall_s": 9.5,
        }
    },
    "aggregates": [
        {
            "server": "s",
            "backend": "vllm",
            "swept": {},
            "variant": "default",
            "point": 0,
            "label": "1 users",
            "load": {"kind": "users", "users": 1, "warmup_s": 0.0, "duration_s": 3.0, "max_requests": None},
            "metrics": {"output_tokens_per_s": {"mean": 98.0, "ci95": None, "n": 1, "values": [98.0]}},
        }
    ],
    "complete": False,
}


def test_round_trip_is_the_same_json() -> None:
    exp = Experiment.from_json(STATE)
    assert exp.to_json() == STATE
    assert list(exp.to_json()["servers"][0]) == ["label", "backend", "swept", "status", "error"]  # no key added


def test_set_server_replaces_by_label_or_appends() -> None:
    exp = Experiment.from_json(STATE)
    exp.set_server(exp.servers[0].model_copy(update={"status": "ok", "error": None, "cold_start_s": 2.0}))
    exp.set_server(ServerRow(label="t", backend="attached", swept={}, status="pending", error=None))
    assert [(s.label, s.status) for s in exp.servers] == [("s", "ok"), ("t", "pending")]
    assert exp.to_json()["servers"][0]["cold_start_s"] == 2.0


def test_assignment_is_validated_and_unknown_keys_refused() -> None:
    exp = Experiment.from_json(STATE)
    exp.cells["x"] = CellRow(server="s", variant="v", trial=2, status="running", error=None, run_dir="cells/x")
    exp.complete = True
    assert exp.to_json()["complete"] is True and "wall_s" not in exp.to_json()["cells"]["x"]
    with pytest.raises(ValidationError):
        exp.complete = "maybe"  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        Experiment.from_json({**STATE, "extra": 1})
