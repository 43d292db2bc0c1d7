"""FrozenModel: the one base of settings and results types (config, experiment files, results)."""

import pydantic
import pytest

from tokenbench.common.frozen import FrozenModel
from tokenbench.config import RunConfig
from tokenbench.experiments.spec import ExperimentSpec
from tokenbench.results import RunResults, TrialStat
from tokenbench.results.capacity import CapacityResult


class _Point(FrozenModel):
    x: int


def test_an_unknown_key_is_an_error_that_names_it():
    with pytest.raises(pydantic.ValidationError, match="colour"):
        _Point.model_validate({"x": 1, "colour": "red"})


def test_a_validated_value_never_changes():
    p = _Point(x=1)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        p.x = 2  # type: ignore[misc]
    assert hash(p) == hash(_Point(x=1))


@pytest.mark.parametrize("model", [RunConfig, ExperimentSpec, RunResults, CapacityResult, TrialStat])
def test_settings_and_results_share_it(model):
    assert issubclass(model, FrozenModel)
