"""report/fmt.py: numbers as text (a missing number is "–", never 0), a trial statistic in its
metric's unit, and text from files escaped for HTML and Markdown."""

from __future__ import annotations

import math

from tokenbench.catalogue import REQUESTS_PER_S, TTFT_P50
from tokenbench.report import fmt
from tokenbench.results import TrialStat


def test_num_scales_rounds_and_groups_thousands():
    assert fmt.num(0.1234, 1, 1000) == "123.4"
    assert fmt.num(12345.678, 2) == "12,345.68"
    assert fmt.num(3) == "3.0"


def test_a_missing_number_is_the_null_text():
    assert fmt.num(None) == fmt.NULL_TEXT == "–"
    assert fmt.num(math.nan) == "–"
    assert fmt.seconds(None) == "–"
    assert fmt.percent(None) == "–"


def test_seconds_and_signed_percent():
    assert fmt.seconds(2.25) == "2.2 s"  # round half to even, as format does
    assert fmt.percent(0.1234) == "+12.3%"
    assert fmt.percent(-0.05, 0) == "-5%"


def test_stat_in_the_metrics_unit_with_its_ci():
    ttft = TrialStat(mean=0.25, ci95=0.0125, n=3, values=[0.24, 0.25, 0.26])
    assert fmt.stat(ttft, TTFT_P50) == "250.0 ± 12.5 ms"  # seconds shown in ms, 1 digit
    assert fmt.stat(ttft, TTFT_P50, unit=False) == "250.0 ± 12.5"
    one = TrialStat(mean=2.0, ci95=None, n=1, values=[2.0])
    assert fmt.stat(one, REQUESTS_PER_S) == "2.00 req/s"  # one trial: no CI


def test_stat_without_a_mean_is_the_null_text():
    assert fmt.stat(None, TTFT_P50) == "–"
    assert fmt.stat(TrialStat(mean=None, ci95=None, n=0, values=[]), TTFT_P50) == "–"


def test_esc_escapes_html_and_reads_none_as_empty():
    assert fmt.esc('<b a="1">&') == "&lt;b a=&quot;1&quot;&gt;&amp;"
    assert fmt.esc(None) == ""
    assert fmt.esc(3) == "3"


def test_md_keeps_a_value_inside_its_table_cell():
    assert fmt.md("a|b\nc\rd") == "a\\|b c d"
    assert fmt.md("<script>") == "&lt;script&gt;"
    assert fmt.md(None) == ""
