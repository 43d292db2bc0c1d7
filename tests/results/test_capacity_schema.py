"""capacity.json's committed schema is the types' (``python -m tokenbench.results`` rewrites it)."""

from __future__ import annotations

import json

from tokenbench.results import SCHEMA_PATH
from tokenbench.results.capacity import capacity_schema


def test_the_committed_capacity_schema_is_current():
    committed = json.loads((SCHEMA_PATH.parent / "capacity.schema.json").read_text())
    assert committed == capacity_schema(), "stale: run python -m tokenbench.results and commit schemas/"
