"""compare --fail-on's grammar (gate/spec.py): metrics from the catalogue, p50/p90/p99/mean, a
signed percent in the metric's bad direction; anything else one BadInput line naming --fail-on."""

from __future__ import annotations

import pytest

from tokenbench.compare.gate import parse_fail_on
from tokenbench.errors import BadInput


def test_the_issue_spec_parses() -> None:
    ttft, tput = parse_fail_on("ttft:p90:+5%, output_tokens_per_s:-3%")
    assert ttft.metric.key == "ttft_s_p90" and ttft.limit == pytest.approx(0.05) and ttft.worse_up
    assert ttft.metric.get is not None and ttft.metric.distribution is not None
    assert tput.metric.key == "output_tokens_per_s" and tput.signed_limit == pytest.approx(-0.03)
    assert ttft.breached(0.051) and not ttft.breached(0.05) and not ttft.breached(-0.5)
    assert tput.breached(-0.031) and not tput.breached(+0.5)


def test_names_stats_and_signs() -> None:
    [g] = parse_fail_on("ttft_s:p99:+10%")  # the results.json key works as the short name does
    assert g.metric.key == "ttft_s_p99" and g.metric.title == "TTFT p99"
    [g] = parse_fail_on("tpot:mean:2.5%")  # no sign: the metric's bad direction
    assert g.metric.key == "tpot_s_mean" and g.signed_limit == pytest.approx(0.025)
    [g] = parse_fail_on("requests_per_s:5%")
    assert g.signed_limit == pytest.approx(-0.05)
    [g] = parse_fail_on("E2E:P50:+0%")
    assert g.metric.key == "e2e_s_p50" and g.breached(0.001)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("", "--fail-on is empty"),
        ("ttft:p90:+5%,", "empty gate"),
        ("ttft:+5%", "ttft is a distribution: name a statistic"),
        ("ttft:p95:+5%", "statistic 'p95' is not one of p50, p90, p99, mean"),
        ("ttft:p90:5", "not a signed percent"),
        ("ttft:p90:+five%", "not a signed percent"),
        ("ttft:p90:-5%", "write ttft:p90:+5%"),  # a latency regresses upwards
        ("output_tokens_per_s:+3%", "write output_tokens_per_s:-3%"),
        ("tokens:p90:+5%", "'tokens' is not a distribution"),
        ("latency:+5%", "unknown metric 'latency'"),
        ("ttft:p90:+5%:x", "write METRIC:LIMIT or DISTRIBUTION:STAT:LIMIT"),
        ("ttft:p90:+5%,ttft_s:p90:+9%", "ttft_s_p90 gated twice"),
    ],
)
def test_bad_specs_say_what_to_write(spec: str, needle: str) -> None:
    with pytest.raises(BadInput, match="--fail-on") as info:
        parse_fail_on(spec)
    assert needle in str(info.value)
