"""errors.py: one type for bad input, a ValueError so that a pydantic validator raising it still
gives a ValidationError; the domain errors that mean bad input are of it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from tokenbench.errors import BAD_INPUT_EXIT, BUG_EXIT, BadInput


def test_bad_input_in_a_validator_is_a_validation_error():
    class Settings(BaseModel):
        n: int

        @field_validator("n")
        @classmethod
        def _positive(cls, v: int) -> int:
            if v <= 0:
                raise BadInput(f"--n must be above 0, got {v}")
            return v

    with pytest.raises(ValidationError, match="--n must be above 0, got -1"):
        Settings(n=-1)


def test_the_domain_errors_of_bad_input_are_bad_input():
    from tokenbench.capacity.objectives import ObjectiveError
    from tokenbench.cli.common import UsageError
    from tokenbench.cli.vllm_flags import FlagError
    from tokenbench.datasets.traces import TraceError
    from tokenbench.experiments.spec import ExperimentError
    from tokenbench.history.export import ExportError
    from tokenbench.rundir import OutDirError
    from tokenbench.rundir.derive import RecomputeError
    from tokenbench.rundir.read import ReportInputError

    kinds = (ObjectiveError, UsageError, TraceError, RecomputeError, ExperimentError, ExportError)
    for kind in (*kinds, ReportInputError, OutDirError, FlagError):
        assert issubclass(kind, BadInput) and issubclass(kind, ValueError), kind
    assert (BAD_INPUT_EXIT, BUG_EXIT) == (2, 70)


def test_bad_input_raised_where_the_input_is_read():
    from tokenbench.common.units import parse_duration_s

    with pytest.raises(BadInput, match="cannot read a duration from 'soon'"):
        parse_duration_s("soon")
