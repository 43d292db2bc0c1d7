"""Each vocabulary is declared once, as a Literal of the settings (or of the results, for what a
run writes), and every table keyed by it covers it exactly: a new value is one edit there, and a
test here names the table that lacks it."""

from __future__ import annotations

from typing import get_args

from tokenbench.backends import PROFILES
from tokenbench.backends.cache_control import CacheReset
from tokenbench.clients import WIRES
from tokenbench.clients.embeddings import PATHS, RESULTS_KEY
from tokenbench.config import POOLING_APIS, Api, DatasetName, OutputConstraint, PoolingApi, TraceFormat
from tokenbench.config.constraints import KINDS, ConstraintKind, Dialect
from tokenbench.datasets import SOURCES
from tokenbench.datasets.traces import DEFAULT_BLOCK_SIZE, FORMATS
from tokenbench.results.manifest import PrefixCacheReset, ResetStatus


def test_every_api_has_one_wire_and_the_pooling_apis_are_apis():
    assert set(WIRES) == set(get_args(Api))
    assert set(POOLING_APIS) == set(get_args(PoolingApi)) <= set(get_args(Api))
    assert set(PATHS) == set(RESULTS_KEY) == set(POOLING_APIS)


def test_every_dataset_name_has_one_source():
    # a trace is replayed row by row (datasets.trace_plan), agent programs call by call
    # (datasets.programs), never built as a list
    streamed = {"trace", "programs"}
    assert set(SOURCES) | streamed == set(get_args(DatasetName)) and not streamed & set(SOURCES)


def test_every_program_format_read_is_one_the_flag_names():
    from tokenbench.config import DatasetConfig
    from tokenbench.datasets.programs import READERS

    help_text = DatasetConfig.model_fields["program_format"].metadata[0].help
    named = set(help_text.rsplit(": ", 1)[1].rstrip(".").replace(",", " ").split())
    assert named == set(READERS)


def test_the_trace_formats_the_settings_take_are_the_ones_the_reader_reads():
    assert set(FORMATS) == set(DEFAULT_BLOCK_SIZE) == set(get_args(TraceFormat))


def test_the_constraint_kinds_and_dialects_are_one_vocabulary():
    assert (
        set(KINDS) == set(get_args(ConstraintKind)) == set(get_args(OutputConstraint.model_fields["kind"].annotation))
    )
    assert {p.structured for p in PROFILES.values()} <= set(get_args(Dialect))


def test_a_reset_writes_the_status_it_made():
    assert CacheReset.__annotations__["status"] == "ResetStatus"
    assert PrefixCacheReset.model_fields["status"].annotation == ResetStatus
