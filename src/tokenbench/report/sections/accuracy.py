"""The report's accuracy section: per configuration and load, a graded dataset's accuracy with its
Wilson 95% interval and counts beside TTFT and output tok/s, so quality reads beside speed (a
faster configuration that answers worse shows here). Only when some point was graded (the
catalogue's optional ``accuracy``). Over trials the counts are summed and the interval is of the
pooled proportion."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.metrics.accuracy import wilson_interval
from tokenbench.metrics.catalogue import ACCURACY, METRICS
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table

CORRECT, GRADED, NOT_GRADED = (METRICS[k] for k in ("accuracy_correct", "accuracy_graded", "accuracy_not_graded"))
COLUMNS = (METRICS["ttft_s_mean"], METRICS["ttft_s_p99"], METRICS["output_tokens_per_s"])

ACCURACY_CAPTION = (
    "Replies of a graded dataset (rows with an expected answer) graded on the client when they ended, by the "
    "grader named (datasets/graders.py). accuracy = correct / graded: the graded requests are the successful "
    "ones of the point's window that carried an expected answer; failed ones have no reply to grade and are "
    "counted apart (not graded), never as wrong. The interval is Wilson's 95% score interval of correct/graded "
    "(trials: their counts summed). TTFT and output tok/s beside it: what the accuracy costs."
)


def accuracy_table(data: ReportData) -> Table | None:
    """One row per configuration and load when some row was graded; else None."""
    if not any(r.mean(ACCURACY.key) is not None for r in data.rows):
        return None
    rows = []
    for r in data.rows:
        correct, graded, failed = r.summed(CORRECT.key), r.summed(GRADED.key), r.summed(NOT_GRADED.key)
        interval = wilson_interval(correct, graded) if correct is not None and graded else None
        cells = [
            r.config,
            r.label,
            fmt.num(correct / graded if correct is not None and graded else None, ACCURACY.digits, ACCURACY.scale),
            "–" if interval is None else f"{interval[0] * 100:.1f} – {interval[1] * 100:.1f}",
            "–" if correct is None or graded is None else f"{correct}/{graded}",
            "–" if failed is None else str(failed),
        ]
        for m in COLUMNS:
            cells.append(fmt.num(r.mean(m.key), m.digits, m.scale))
        rows.append(cells)
    headers = ["configuration", "load", ACCURACY.label, "Wilson 95% (%)", "correct/graded", "not graded"]
    headers += [m.label for m in COLUMNS]
    return Table(headers, rows, numeric=tuple(range(2, len(headers))))
