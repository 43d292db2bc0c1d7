"""Flag text -> settings (units.py): durations in seconds unless a unit says otherwise, and --slo's
per-request objectives; text that does not parse is bad input naming what to write."""

import pytest

from tokenbench.common.units import parse_duration_s
from tokenbench.config.slo import parse_slo
from tokenbench.errors import BadInput


@pytest.mark.parametrize("text,seconds", [("500ms", 0.5), ("2s", 2.0), ("1.5", 1.5), (" 2m ", 120.0), (".25s", 0.25)])
def test_durations_are_seconds_unless_a_unit_says_otherwise(text, seconds):
    assert parse_duration_s(text) == pytest.approx(seconds)


def test_slo_parts_and_their_errors():
    slo = parse_slo("ttft=500ms, tpot=50ms,e2e=3")
    assert (slo.ttft_s, slo.tpot_s, slo.e2e_s) == pytest.approx((0.5, 0.05, 3.0)) and slo.any
    assert not parse_slo("").any
    with pytest.raises(ValueError, match="--slo part 'itl=5ms'"):
        parse_slo("itl=5ms")
    with pytest.raises(ValueError, match="cannot read a duration from 'fast'"):
        parse_slo("ttft=fast")


@pytest.mark.parametrize("text", ["", "fast", "5h", "-1s", "1e3"])
def test_a_duration_that_does_not_parse_is_bad_input_with_an_example(text):
    with pytest.raises(BadInput, match="write e.g. 500ms, 5s"):
        parse_duration_s(text)


def test_slo_names_are_case_blind_and_an_empty_part_is_skipped():
    slo = parse_slo("TTFT=1s,,")
    assert (slo.ttft_s, slo.tpot_s, slo.e2e_s) == (1.0, None, None)
    with pytest.raises(BadInput, match="write NAME=VALUE"):
        parse_slo("ttft")
