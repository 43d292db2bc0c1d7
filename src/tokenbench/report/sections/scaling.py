"""The report's autoscaling section: per point of a run that polled a scaler, its replica timeline
as transitions (when each replica changed state, and the replicas RUNNING from then), and each
scale-up's lags from the load step with the SLO attainment before, during and after it. Only when
some point has a ``scaling`` part (results/scaling.py); times are seconds from the point's start."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table

TIMELINE_CAPTION = (
    "Each replica's state changes as the scaler's API showed them (polled every interval: a change "
    "shows up to an interval late), seconds from the point's start; running and other are the replicas "
    "that poll showed RUNNING and starting or stopping. Replica-seconds: RUNNING replicas integrated over "
    "the point."
)
LAGS_CAPTION = (
    "Each scale-up timed from the load step (the point's start, its load higher than the point before): "
    "until the scaler first showed the new replica, until it was RUNNING, until the first reply it served "
    "began (records' replica). SLO attainment of the requests scheduled before (step to seen), during "
    "(seen to RUNNING) and after (RUNNING to the point's end); – without an SLO or a request."
)


def timeline_table(data: ReportData) -> Table | None:
    """One row per replica transition of each point, and one per point for its totals."""
    if not data.scaling:
        return None
    rows = []
    for r in data.scaling:
        polls = {row.t_s: row for row in r.scaling.timeline}
        for t in r.scaling.transitions:
            row = polls.get(t.t_s)
            change = f"{t.from_state or 'new'} → {t.to_state or 'gone'}"
            running = str(row.running) if row is not None else fmt.NULL_TEXT
            other = str(row.other) if row is not None else fmt.NULL_TEXT
            rows.append([r.config, r.label, fmt.num(float(t.t_s) - r.start_s, 2), t.replica, change, running, other])
        seconds = fmt.num(r.scaling.replica_seconds, 1)
        mean = fmt.num(r.scaling.mean_running_replicas, 2)
        rows.append([r.config, r.label, "whole point", f"{seconds} replica-s", f"mean {mean} running", "", ""])
    headers = ["configuration", "load", "t (s)", "replica", "change", "running", "other"]
    return Table(headers, rows, numeric=(2, 5, 6))


def lags_table(data: ReportData) -> Table | None:
    """One row per scale-up; None when no point scaled up."""
    rows = []
    for r in data.scaling:
        for up in r.scaling.scale_ups:
            slo = [w.attainment if w is not None else None for w in (up.slo_before, up.slo_during, up.slo_after)]
            rows.append(
                [
                    r.config,
                    r.label,
                    up.replica,
                    fmt.num(up.lag_seen_s, 2),
                    fmt.num(up.lag_running_s, 2),
                    fmt.num(up.lag_first_request_s, 2),
                    *(fmt.num(a, 1, 100.0) for a in slo),
                ]
            )
    if not rows:
        return None
    headers = [
        "configuration",
        "load",
        "replica",
        "to seen (s)",
        "to RUNNING (s)",
        "to first reply (s)",
        "SLO before (%)",
        "SLO during (%)",
        "SLO after (%)",
    ]
    return Table(headers, rows, numeric=tuple(range(3, len(headers))))
