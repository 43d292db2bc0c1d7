"""Side-by-side comparison (report/compare.py): deltas, Welch's t-test, Holm-Bonferroni."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_synthetic import point, results, write_run
from rich.console import Console

from tokenbench.compare import compare, compare_markdown, compare_table, comparison, holm, welch_p
from tokenbench.errors import BadInput
from tokenbench.results import TrialStat


def test_compare_deltas_and_significance(users_experiments: tuple[Path, Path]) -> None:
    a, b = users_experiments
    rows = compare([a, b])
    by = {(r.label, r.metric): r for r in rows}
    tput = by[("4 users", "output_tokens_per_s")]
    assert tput.baseline.mean == pytest.approx(400.0) and tput.other.mean == pytest.approx(440.0)
    assert tput.delta == pytest.approx(40.0) and tput.delta_pct == pytest.approx(0.10)
    assert tput.significant is True and tput.p_adjusted < 0.05 and tput.better is True
    assert tput.p_adjusted >= tput.p_value  # Holm never lowers a p-value
    ttft = by[("4 users", "ttft_s_mean")]
    assert ttft.delta == pytest.approx(0.0, abs=1e-12)
    assert ttft.significant is False and ttft.p_value == pytest.approx(1.0)
    assert tput.baseline_config == tput.other_config == "vllm"

    md = compare_markdown(rows)
    assert "+10.0%" in md and "yes (p=" in md and "no (p=1.000, Holm 1.000)" in md
    console = Console(record=True, width=220)
    console.print(compare_table(rows))
    assert "+10.0%" in console.export_text()


def test_compare_single_trial_is_na(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", results([point(0, "users", 4, tokens_per_s=100.0)], backend="vllm"))
    b = write_run(tmp_path / "b", results([point(0, "users", 4, tokens_per_s=80.0)], backend="sglang"))
    rows = compare([a, b])
    tput = next(r for r in rows if r.metric == "output_tokens_per_s")
    # different backends, one configuration each: matched by load
    assert (tput.baseline_config, tput.other_config) == ("vllm", "sglang")
    assert tput.delta == pytest.approx(-20.0) and tput.delta_pct == pytest.approx(-0.2)
    assert tput.significant is None and tput.p_value is None and tput.better is False
    assert "n/a" in compare_markdown(rows)


def test_compare_needs_two() -> None:
    with pytest.raises(ValueError):
        compare([Path(".")])


def test_welch_without_variance() -> None:
    same = TrialStat(mean=1.0, ci95=0.0, n=3, values=[1.0, 1.0, 1.0])
    other = TrialStat(mean=2.0, ci95=0.0, n=3, values=[2.0, 2.0, 2.0])
    assert welch_p(same, same) == 1.0
    assert welch_p(same, other) is None  # two constants: untestable, never p = 0
    assert welch_p(same, TrialStat(mean=1.0, ci95=None, n=1, values=[1.0])) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.0, 2.0, 3.0], [2.0, 3.0, 4.5]),
        ([10.0, 10.5], [9.0, 12.0, 11.0, 10.1]),
        ([5.0, 5.0, 5.0], [4.0, 6.0, 5.5]),  # one side without variance
        ([0.1, 0.2, 0.15, 0.18, 0.11], [0.3, 0.5, 0.45, 0.41, 0.6]),
    ],
)
def test_welch_is_scipys_ttest(a: list[float], b: list[float]) -> None:
    import warnings

    from scipy import stats

    with warnings.catch_warnings():  # scipy warns of precision over a side without variance
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = stats.ttest_ind(a, b, equal_var=False).pvalue
    got = welch_p(
        TrialStat(mean=None, ci95=None, n=len(a), values=a), TrialStat(mean=None, ci95=None, n=len(b), values=b)
    )
    assert got == pytest.approx(expected, rel=1e-9)


def test_holm_bonferroni_adjusts_many_tests() -> None:
    # m = 4: 0.01 x 4, 0.02 x 3, 0.03 x 2 -> monotone, 0.04 x 1 -> 0.06 (kept monotone), None stays
    assert holm([0.03, None, 0.01, 0.04, 0.02]) == pytest.approx([0.06, None, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_points_match_by_load_and_unmatched_ones_are_named(tmp_path: Path) -> None:
    """A new user's report: a point with no match was a row 'attached vs –'; runs were named 'attached'."""
    a = write_run(
        tmp_path / "a",
        results([point(0, "users", 2), point(1, "users", 4, tokens_per_s=100.0)], backend="attached", model="m1"),
    )
    b = write_run(
        tmp_path / "b",
        results([point(0, "users", 4, tokens_per_s=80.0), point(1, "users", 8)], backend="attached", model="m2"),
    )
    result = comparison([a, b])
    assert {r.label for r in result.rows} == {"4 users"}  # 2 and 8 users have no partner: no row
    tput = next(r for r in result.rows if r.metric == "output_tokens_per_s")
    assert tput.delta == pytest.approx(-20.0)
    assert (tput.baseline_config, tput.other_config) == ("m1 at http://127.0.0.1:8000", "m2 at http://127.0.0.1:8000")
    assert result.unmatched == ["not in b: a's 2 users", "not in the baseline a: b's 8 users"]
    console = Console(record=True, width=300, color_system=None)
    console.print(compare_table(result))
    text = console.export_text()
    assert "a: m1 at http://127.0.0.1:8000 (baseline) vs b: m2 at http://127.0.0.1:8000" in text
    assert "attached" not in text and " vs – " not in text
    assert "n/a (1 trial)" in text
    assert "significant: n/a where a side has fewer than 2 trials (one trial per point: run --trials 3" in text
    assert "not in b: a's 2 users" in compare_markdown(result)


def test_a_users_run_against_a_rate_run_matches_nothing_exit_2(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", results([point(0, "users", 4)]))
    b = write_run(tmp_path / "b", results([point(0, "rate", 2.0)], backend="sglang"))
    with pytest.raises(BadInput, match=r"no load point of b \(2 req/s\) matches one of the baseline a \(4 users\)"):
        comparison([a, b])
