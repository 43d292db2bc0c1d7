"""Numbers and text as the report shows them (report/fmt.py): a missing number is "–", never 0;
text from a file is escaped for HTML and cannot break a Markdown table."""

from __future__ import annotations

from tokenbench.console.fmt import NULL_TEXT, esc, md, num, percent, scaled, seconds, stat
from tokenbench.metrics.catalogue import METRICS, TTFT_MEAN
from tokenbench.results import TrialStat


def test_num_scales_rounds_and_groups_thousands():
    assert num(1234.5678, digits=2) == "1,234.57"
    assert num(0.1234, digits=1, scale=1e3) == "123.4"
    assert num(0) == "0.0"  # zero is a number, shown as one


def test_a_missing_number_is_the_null_text():
    assert NULL_TEXT == "–"
    assert num(None) == num(float("nan")) == seconds(None) == percent(None) == NULL_TEXT


def test_seconds_and_signed_percent():
    assert seconds(12.345) == "12.3 s"
    assert percent(0.1234) == "+12.3%"
    assert percent(-0.05, digits=0) == "-5%"


def test_stat_shows_the_mean_its_ci_and_the_metrics_unit():
    ttft = TrialStat(mean=0.1234, ci95=0.0056, n=3, values=[0.12, 0.123, 0.1272])
    assert stat(ttft, TTFT_MEAN) == "123.4 ± 5.6 ms"
    assert stat(ttft, TTFT_MEAN, unit=False) == "123.4 ± 5.6"
    one = TrialStat(mean=0.1234, ci95=None, n=1, values=[0.1234])
    assert stat(one, TTFT_MEAN) == "123.4 ms"  # no CI below 2 trials
    hit_rate = TrialStat(mean=0.5, ci95=None, n=1, values=[0.5])
    assert stat(hit_rate, METRICS["prefix_cache_hit_rate"]) == "50.0%"  # no space before %
    assert stat(None, TTFT_MEAN) == NULL_TEXT
    assert stat(TrialStat(mean=None, ci95=None, n=0, values=[]), TTFT_MEAN) == NULL_TEXT


def test_esc_escapes_html_and_none_is_empty():
    assert esc('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert esc(None) == ""
    assert esc(3) == "3"


def test_md_keeps_a_table_row_one_row():
    assert md("a|b\nc\rd") == "a\\|b c d"
    assert md("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md(None) == ""


def test_scaled_is_the_shown_unit_and_keeps_a_missing_number_missing():
    assert scaled(0.25, 1e3) == 250.0
    assert scaled(0.0, 1e3) == 0.0
    assert scaled(None, 1e3) is None
