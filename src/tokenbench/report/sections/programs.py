"""The report's agent-programs section (``--dataset programs``): per point its sessions (how they
ended, their latency, rate, calls and the schedule's lag, the prefix reuse the programs imply
against the server's), where a session's time went along its critical path (a stacked bar a
point, and the table), its calls by role and by depth, its slowest sessions from records, and the
slowest session's timeline call by call. Every number is the results' (results.json's
``programs``) or metrics.programs' over the records (the sessions): shown only for a run with
programs points."""

from __future__ import annotations

from tokenbench.common.slug import slug
from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.programs import PARTS
from tokenbench.report.chart_spec import Chart, Panel, Series
from tokenbench.report.read.data import CallSpan, ProgramRow, ReportData, SessionTimeline
from tokenbench.report.read.programs import SLOWEST_SESSIONS, TIMELINE_CALLS
from tokenbench.report.sections.tables import Table
from tokenbench.results import CallGroup, Distribution

SECTION = "programs"
MAX_TIMELINE_CHARTS = 12  # sessions drawn call by call: the first this many points'

# A critical path's parts (metrics.programs.PARTS), as the report names and colours them.
PART_TITLES: dict[str, str] = {
    "dispatch": "dispatch (network, frontend)",
    "queue": "queue",
    "prefill": "prefill",
    "delivery": "delivery",
    "ttft": "TTFT (not split)",
    "decode": "decode",
    "tool": "tool",
    "think": "think",
    "lag": "schedule lag",
}
PART_COLORS: dict[str, str] = {
    "dispatch": "#17becf",
    "queue": "#d62728",
    "prefill": "#ff7f0e",
    "delivery": "#bcbd22",
    "ttft": "#9467bd",
    "decode": "#1f77b4",
    "tool": "#2ca02c",
    "think": "#c7c7c7",
    "lag": "#e377c2",
}

# A timeline's segments: the wait its parent's edge recorded, the schedule's lag, the call itself
WAIT_COLOR, LAG_COLOR, CALL_COLOR, PATH_COLOR = "#e0e0e0", "#fdae6b", "#9ecae1", "#d62728"

PROGRAMS_CAPTION = (
    "Agent programs (--dataset programs): each session a graph of dependent calls, each call sent when its "
    "parents allowed. Sessions started, completed, ended by error and by stop count the whole point, as the "
    "load generator ran them; the measured sessions are the completed ones that started in the measurement "
    "window, and their latency (the last call's stream end − the session's scheduled start), rate (per second "
    "of the window), calls and critical-path calls are over them. The schedule's lag (sent − when the parents "
    "allowed) is over the calls of the window population. Expected reuse: the ok calls' prompt tokens that "
    "repeat a parent's prompt and reply; measured: the server's cached prompt tokens of the ok calls' prompt "
    "tokens (– where the server says nothing)."
)
PARTS_CAPTION = (
    "Each measured session's critical path, from its last call's end back through the parent that allowed "
    "each call last to the session's start, split into parts that add up to its latency: a call's model time "
    "(with server spans: dispatch, queue, prefill, delivery; with llama.cpp's timings: queue and prefill; "
    "else TTFT not split; then decode), the tool's run and the rest of the recorded wait (think; a root's "
    "offset), and the schedule's lag. Per point each part's mean seconds per session and its share of the "
    "sessions' summed latency; parts that are 0 at every point are left out."
)
CALL_GROUPS_CAPTION = (
    "The calls of each point's window population by role (root, subagent, after_tool, follow_up) and by "
    "sub-agent depth: TTFT and E2E over the ok ones, the schedule's lag over those sent."
)
SESSIONS_CAPTION = (
    f"Each point's {SLOWEST_SESSIONS} slowest completed sessions from records.jsonl (the whole point: a session "
    "outside the measurement window says so), slowest first: its ok calls' tokens and the reuse its prompts imply "
    "against the server's cached share, and its critical path's parts in seconds."
)
TIMELINE_CAPTION = (
    "The point's slowest completed session, one bar per call in the order they were sent, seconds from the "
    "session's scheduled start on the run clock: grey, the recorded wait after the anchor of the parent that "
    "allowed the call last (its end, start or first token; a root's: its offset from the session's start); "
    "orange, the schedule's lag (allowed → sent); then the call, sent → its stream's end, red where it is on "
    "the critical path."
)


def _dist(d: Distribution, stat: str, digits: int, scale: float = 1.0) -> str:
    value = getattr(d, stat)
    return fmt.num(None if value is None else float(value), digits, scale)


def _value(v: float | None, digits: int, scale: float = 1.0) -> str:
    return fmt.num(None if v is None else float(v), digits, scale)


def _count(v: int | None) -> str:
    return NULL_TEXT if v is None else str(v)


def programs_table(data: ReportData) -> Table | None:
    """One row per programs point: its sessions, their latency and rate, calls, lag and reuse."""
    if not data.programs:
        return None
    rows = []
    for r in data.programs:
        st, counts = r.stats, r.stats.sessions
        rows.append(
            [
                r.config,
                r.label,
                _count(counts.started if counts else None),
                _count(counts.completed if counts else None),
                _count(counts.ended_by_error if counts else None),
                _count(counts.ended_by_stop if counts else None),
                str(st.measured_sessions),
                _dist(st.session_s, "p50", 3),
                _dist(st.session_s, "p90", 3),
                _dist(st.session_s, "p99", 3),
                _value(st.sessions_per_s, 3),
                _dist(st.calls_per_session, "mean", 1),
                _dist(st.critical_path.calls, "mean", 1),
                _dist(st.schedule_lag_s, "p50", 2, 1e3),
                _dist(st.schedule_lag_s, "p99", 2, 1e3),
                _value(st.expected_reuse, 1, 100),
                _value(st.measured_reuse, 1, 100),
            ]
        )
    headers = [
        "configuration",
        "load",
        "sessions started",
        "completed",
        "ended by error",
        "ended by stop",
        "measured",
        "session p50 (s)",
        "session p90 (s)",
        "session p99 (s)",
        "sessions/s",
        "calls per session",
        "critical-path calls",
        "schedule lag p50 (ms)",
        "schedule lag p99 (ms)",
        "expected reuse (%)",
        "measured reuse (%)",
    ]
    return Table(headers, rows, numeric=tuple(range(2, len(headers))))


def shown_parts(data: ReportData) -> tuple[str, ...]:
    """The parts some point's critical path (or some slowest session's) has time in, in PARTS' order."""
    used = {k for r in data.programs for k, v in r.stats.critical_path.mean_s.items() if v}
    used |= {k for s in data.sessions for k, v in s.parts.items() if v}
    return tuple(k for k in PARTS if k in used)


def _measured(rows: tuple[ProgramRow, ...]) -> list[ProgramRow]:
    return [r for r in rows if r.stats.measured_sessions > 0 and r.stats.critical_path.mean_s]


def parts_table(data: ReportData) -> Table | None:
    """Where the time went: per point with measured sessions each part's mean seconds a session and share."""
    rows = _measured(data.programs)
    if not rows:
        return None
    parts = shown_parts(data)
    body = []
    for r in rows:
        cp = r.stats.critical_path
        cells = [r.config, r.label, str(r.stats.measured_sessions), _dist(r.stats.session_s, "mean", 3)]
        for k in parts:
            mean, share = cp.mean_s.get(k), cp.share.get(k)
            cells.append(f"{_value(mean, 3)} ({_value(share, 1, 100)}%)")
        body.append(cells)
    headers = ["configuration", "load", "sessions", "session mean (s)"] + [f"{PART_TITLES[k]} s (%)" for k in parts]
    return Table(headers, body, numeric=tuple(range(2, len(headers))))


def _group_cells(g: CallGroup) -> list[str]:
    return [
        str(g.count),
        str(g.ok),
        _dist(g.ttft_s, "p50", 1, 1e3),
        _dist(g.ttft_s, "p90", 1, 1e3),
        _dist(g.e2e_s, "p50", 1, 1e3),
        _dist(g.e2e_s, "p90", 1, 1e3),
        _dist(g.schedule_lag_s, "p99", 2, 1e3),
    ]


def call_groups_table(data: ReportData) -> Table | None:
    """Per point its calls by role, then by depth."""
    rows = []
    for r in data.programs:
        for kind, groups in (("role", r.stats.by_role), ("depth", r.stats.by_depth)):
            rows += [[r.config, r.label, kind, name, *_group_cells(g)] for name, g in groups.items()]
    if not rows:
        return None
    headers = [
        "configuration",
        "load",
        "by",
        "group",
        "calls",
        "ok",
        "TTFT p50 (ms)",
        "TTFT p90 (ms)",
        "E2E p50 (ms)",
        "E2E p90 (ms)",
        "schedule lag p99 (ms)",
    ]
    return Table(headers, rows, numeric=tuple(range(4, len(headers))))


def sessions_table(data: ReportData) -> Table | None:
    """Each point's slowest completed sessions, with their critical path's parts."""
    if not data.sessions:
        return None
    parts = shown_parts(data)
    rows = [
        [
            s.config,
            s.label,
            s.session,
            s.program,
            "yes" if s.measured else "no",
            _value(s.latency_s, 3),
            str(s.calls),
            str(s.path_calls),
            str(s.prompt_tokens),
            str(s.output_tokens),
            _value(s.expected_reuse, 1, 100),
            _value(s.measured_reuse, 1, 100),
            *(_value(s.parts.get(k), 3) for k in parts),
        ]
        for s in data.sessions
    ]
    headers = [
        "configuration",
        "load",
        "session",
        "program",
        "in window",
        "latency (s)",
        "calls",
        "critical-path calls",
        "prompt tokens",
        "output tokens",
        "expected reuse (%)",
        "measured reuse (%)",
    ] + [f"{PART_TITLES[k]} (s)" for k in parts]
    return Table(headers, rows, numeric=tuple(range(5, len(headers))))


def parts_chart(data: ReportData) -> list[Chart]:
    """Where a session's time went, per point: its critical path's parts stacked (mean s, and share)."""
    rows = _measured(data.programs)
    if not rows:
        return []
    categories = [f"{r.config} · {r.label}" for r in rows]
    seconds, shares = [], []
    for k in shown_parts(data):
        title, color = PART_TITLES[k], PART_COLORS[k]
        means: list[float | None] = [_float(r.stats.critical_path.mean_s.get(k)) for r in rows]
        share: list[float | None] = [_scaled(r.stats.critical_path.share.get(k), 100.0) for r in rows]
        hover = [f"{c} · {title}: {fmt.num(m, 3)} s ({fmt.num(s, 1)}%)" for c, m, s in zip(categories, means, share)]
        seconds.append(Series(title, categories, means, kind="bar", color=color, hover=hover))
        shares.append(Series(title, categories, share, kind="bar", color=color, hover=hover, show_legend=False))
    return [
        Chart(
            "programs-critical-path",
            "Where a session's time went, per load point (critical path)",
            "configuration · load",
            [Panel("mean per session (s)", seconds, stacked=True), Panel("% of session latency", shares, stacked=True)],
            x_categorical=True,
            caption=PARTS_CAPTION,
            section=SECTION,
        )
    ]


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)


def _scaled(v: float | None, scale: float) -> float | None:
    return None if v is None else float(v) * scale


def call_label(c: CallSpan) -> str:
    """A timeline row: the call's id, role and sub-agent depth."""
    depth = f" · depth {c.depth}" if c.depth else ""
    return f"{c.call} · {c.role or '?'}{depth}"


def _hover(c: CallSpan, t0: float) -> str:
    after = f"after {c.after} ({c.anchor})" if c.after is not None else "a root"
    return (
        f"{call_label(c)}: {after}; waited from {c.waited_from_s - t0:.3f} s, allowed {c.ready_s - t0:.3f} s, "
        f"sent {c.sent_s - t0:.3f} s, ended {c.closed_s - t0:.3f} s" + ("; on the critical path" if c.on_path else "")
    )


def timeline_chart(t: SessionTimeline, i: int) -> Chart:
    """One session call by call (chart_spec's "span" bars on one row a call)."""
    t0 = t.start_s
    calls = t.calls
    rows = [float(n) for n in range(len(calls))]
    hover = [_hover(c, t0) for c in calls]

    def series(name: str, color: str, start: list[float], end: list[float], keep: list[bool]) -> Series:
        return Series(
            name,
            [s if k else None for s, k in zip(start, keep)],
            [r if k else None for r, k in zip(rows, keep)],
            kind="span",
            color=color,
            hover=hover,
            x_end=[e if k else None for e, k in zip(end, keep)],
        )

    waited = [c.waited_from_s - t0 for c in calls]
    ready = [c.ready_s - t0 for c in calls]
    sent = [c.sent_s - t0 for c in calls]
    closed = [c.closed_s - t0 for c in calls]
    every = [True] * len(calls)
    path = [c.on_path for c in calls]
    panel = Panel(
        "call",
        [
            series("wait (tool, think)", WAIT_COLOR, waited, ready, every),
            series("schedule lag", LAG_COLOR, ready, sent, every),
            series("call (sent → end)", CALL_COLOR, sent, closed, [not p for p in path]),
            series("call on the critical path", PATH_COLOR, sent, closed, path),
        ],
        rows=tuple(call_label(c) for c in calls),
    )
    more = f" {t.left_out} later calls are not drawn (the first {TIMELINE_CALLS} are)." if t.left_out else ""
    return Chart(
        f"session-timeline-{i + 1}-{slug(t.label, keep='')}",
        f"Session timeline: {t.config} · {t.label}, session {t.session} ({t.program}, {t.latency_s:.3f} s)",
        "seconds from the session's start (run clock)",
        [panel],
        caption=TIMELINE_CAPTION + more,
        section=SECTION,
    )


def timeline_charts(data: ReportData) -> list[Chart]:
    return [timeline_chart(t, i) for i, t in enumerate(data.timelines[:MAX_TIMELINE_CHARTS])]


def program_charts(data: ReportData) -> list[Chart]:
    """The section's figures: where the time went, then each point's slowest session."""
    return parts_chart(data) + timeline_charts(data)
