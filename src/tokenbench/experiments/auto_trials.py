"""``trials: auto`` (spec.AutoTrials): whether a (server configuration, variant) needs another
trial, from the aggregates so far (pure).

At each load, the 95% CI of the chosen metric (Student's t over the trials: results.mean_ci95)
is settled when it is *precise* (half-width / |mean| <= precision) or *separated* (apart from the
CI of every other configuration of the same variant at that load: the comparison is decided
whatever more trials would say, at 95%). A configuration stops when every one of its loads is
settled, or at the ceiling; otherwise it runs one more trial and all are judged again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tokenbench.experiments.spec import AutoTrials
from tokenbench.results import AggregateRow, TrialsRow, TrialStat

Group = tuple[str, str]  # (server configuration, variant)


def _relative(stat: TrialStat) -> float | None:
    if stat.ci95 is None or stat.mean is None or stat.mean == 0:
        return None
    return stat.ci95 / abs(stat.mean)


def _apart(a: TrialStat, b: TrialStat) -> bool:
    if a.mean is None or b.mean is None or a.ci95 is None or b.ci95 is None:
        return False
    return a.mean + a.ci95 < b.mean - b.ci95 or b.mean + b.ci95 < a.mean - a.ci95


def verdicts(
    aggregates: Sequence[AggregateRow], trials: dict[Group, int], auto: AutoTrials
) -> dict[Group, TrialsRow | None]:
    """Each group of ``trials`` (its finished trials): a TrialsRow when it is done, None when it
    needs another trial."""
    rows: dict[Group, list[AggregateRow]] = {}
    for row in aggregates:
        rows.setdefault((row.server, row.variant), []).append(row)
    out: dict[Group, TrialsRow | None] = {}
    for group, n in trials.items():
        mine = rows.get(group, [])
        if not mine:
            out[group] = TrialsRow(
                server=group[0],
                variant=group[1],
                trials=n,
                stopped_by="no results",
                metric=auto.metric,
                worst_precision=None,
            )
            continue
        precise = separated = True
        worst: float | None = None
        for row in mine:
            stat = row.metrics.get(auto.metric)
            if stat is None or stat.mean is None:
                continue  # not measured at this load: more trials will not measure it
            rel = _relative(stat)
            worst = rel if worst is None or (rel is not None and rel > worst) else worst
            if rel is not None and rel <= auto.precision:
                continue
            precise = False
            others = [
                o.metrics.get(auto.metric)
                for o in aggregates
                if o.variant == row.variant and o.point == row.point and o.server != row.server
            ]
            if not others or not all(o is not None and _apart(stat, o) for o in others):
                separated = False
        stopped_by: Literal["precision", "separated", "ceiling"] | None = (
            "precision" if precise else "separated" if separated else "ceiling" if n >= auto.max else None
        )
        out[group] = (
            None
            if stopped_by is None
            else TrialsRow(
                server=group[0],
                variant=group[1],
                trials=n,
                stopped_by=stopped_by,
                metric=auto.metric,
                worst_precision=worst,
            )
        )
    return out
