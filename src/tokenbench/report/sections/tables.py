"""The report's tables and verdict sentences as plain strings (unescaped), shared by the HTML and
Markdown renderers. Pure: data in, Table out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import GOOD_FRACTION, GOODPUT_PER_S, shown_in
from tokenbench.report.read.data import ExperimentHeader, ReportData
from tokenbench.report.sections.stability import DEGRADATION_THRESHOLD
from tokenbench.report.sections.verdict import (
    CACHE_REUSE_TOLERANCE,
    SLO_ATTAINMENT,
    CacheFlag,
    ClientFlag,
    Pick,
    Verdict,
    slo_text,
)
from tokenbench.results import TrialStat
from tokenbench.telemetry.client_health import CPU_LIMIT, LAG_MARGIN, LOOP_LAG_LIMIT_S, advice_for


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: tuple[int, ...] = ()  # column indexes to right-align


def _text(v: object) -> str:
    return NULL_TEXT if v is None or v == "" else str(v)


def _slo_cell(slo: dict[str, float | None]) -> str:
    return slo_text(slo) or "none set"


def _swept(swept: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in swept.items()) or NULL_TEXT


def runs_table(data: ReportData) -> Table | None:
    if not data.runs:
        return None
    rows = [
        [
            h.name,
            h.config,
            _text(h.engine),
            _text(h.engine_version),
            fmt.seconds(h.cold_start_s),
            _text(h.model),
            _text(h.api),
            h.dataset,
            _slo_cell(h.slo),
            str(h.num_points),
            "yes" if h.interrupted else "no",
        ]
        for h in data.runs
    ]
    return Table(
        [
            "run",
            "configuration",
            "engine",
            "version",
            "cold start",
            "model",
            "API",
            "dataset",
            "SLO",
            "points",
            "interrupted",
        ],
        rows,
        numeric=(4, 9),
    )


def experiment_facts(exp: ExperimentHeader) -> list[tuple[str, str]]:
    by_status: dict[str, int] = {}
    for c in exp.cells:
        by_status[_text(c.status)] = by_status.get(_text(c.status), 0) + 1
    return [
        ("directory", str(exp.path)),
        ("description", exp.description or NULL_TEXT),
        ("complete", "yes" if exp.complete else "no (some cells did not run)"),
        ("model", _text(exp.model)),
        ("dataset", exp.dataset),
        ("load", exp.load),
        ("trials per point", f"auto: {', '.join(exp.trials_needed)}" if exp.trials_needed else _text(exp.trials)),
        ("SLO", _slo_cell(exp.slo)),
        ("cells", ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) or NULL_TEXT),
    ]


def servers_table(exp: ExperimentHeader) -> Table:
    rows = [
        [
            s.label,
            _text(s.backend),
            _swept(s.swept),
            _text(s.status),
            _text(s.engine_version),
            fmt.seconds(s.cold_start_s),
            _text(s.error),
        ]
        for s in exp.servers
    ]
    return Table(["server", "backend", "swept", "status", "engine version", "cold start", "error"], rows, numeric=(5,))


def failed_cells_table(exp: ExperimentHeader) -> Table | None:
    rows = [
        [c.cell_id, c.server, _text(c.variant), _text(c.trial), _text(c.status), _text(c.error)]
        for c in exp.cells
        if c.status != "ok"
    ]
    if not rows:
        return None
    return Table(["cell", "server", "variant", "trial", "status", "error"], rows)


def headline_table(data: ReportData) -> Table | None:
    """One row per configuration and load, one column per metric of the catalogue's report view."""
    if not data.rows:
        return None
    metrics = tuple(  # an optional metric (TTFO, cost, energy) only when some row has it
        m
        for m in shown_in("report")
        if not (m.optional or (m.distribution is not None and m.distribution.optional))
        or any(r.metrics.get(m.key) is not None and r.metrics[m.key].mean is not None for r in data.rows)
    )
    rows = []
    for r in data.rows:
        rows.append(
            [r.config, r.label, str(r.num_trials)] + [fmt.stat(r.metrics.get(m.key), m, unit=False) for m in metrics]
        )
    headers = ["configuration", "load", "trials"] + [m.label for m in metrics]
    return Table(headers, rows, numeric=tuple(range(2, 3 + len(metrics))))


def turns_table(data: ReportData) -> Table | None:
    """Multi-turn session runs: per configuration, load and turn index, the TTFT (ms) and the
    prompt tokens; None without a session run."""
    if not data.turns:
        return None
    rows = [
        [
            t.config,
            t.label,
            str(t.turn_index),
            str(t.count),
            fmt.num(t.ttft_mean_s, scale=1e3),
            fmt.num(t.ttft_p90_s, scale=1e3),
            fmt.num(t.prompt_tokens_mean, digits=0),
        ]
        for t in data.turns
    ]
    headers = ["configuration", "load", "turn", "requests", "TTFT mean (ms)", "TTFT p90 (ms)", "prompt tokens mean"]
    return Table(headers, rows, numeric=(2, 3, 4, 5, 6))


def images_table(data: ReportData) -> Table | None:
    """Points that sent images: per configuration and load, the images a
    request, their size, images/s, the server's prompt tokens and TTFT; None without any."""
    if not data.images:
        return None
    rows = [
        [
            i.config,
            i.label,
            str(i.requests),
            fmt.num(i.images_per_request, digits=2),
            fmt.num(i.pixels_per_image / 1e6 if i.pixels_per_image is not None else None, digits=3),
            fmt.num(i.images_per_s, digits=2),
            fmt.num(i.prompt_tokens_mean, digits=0),
            fmt.num(i.ttft_mean_s, scale=1e3),
        ]
        for i in data.images
    ]
    headers = [
        "configuration",
        "load",
        "requests with images",
        "images / request",
        "megapixels / image",
        "images/s",
        "prompt tokens mean",
        "TTFT mean (ms)",
    ]
    return Table(headers, rows, numeric=(2, 3, 4, 5, 6, 7))


PHASE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("network", "sent→server"),
    ("frontend", "frontend"),
    ("queue", "queue"),
    ("prefill", "prefill"),
    ("delivery", "delivery"),
    ("decode", "decode"),
    ("client_minus_server_ttft", "client−server TTFT"),
)


def phases_table(data: ReportData) -> Table | None:
    """Where the time went (points joined to server spans): per configuration and load,
    the share joined, each phase's median and, beside it, its mean over the slowest 1% by TTFT
    (a rising queue share under load is visible down the column); None without any."""
    if not data.phases:
        return None
    rows = []
    for p in data.phases:
        cells = [p.config, p.label, str(p.requests), fmt.num(p.joined_share, scale=100, digits=1)]
        for name, _ in PHASE_COLUMNS:
            median, slow = p.p50_s.get(name), p.slowest_s.get(name)
            cells.append(f"{fmt.num(median, scale=1e3)} / {fmt.num(slow, scale=1e3)}")
        cells.append(fmt.num(p.clock_offset_s, scale=1e3, digits=2))
        rows.append(cells)
    headers = ["configuration", "load", "requests", "joined %"]
    headers += [f"{title} p50 / slowest 1% (ms)" for _, title in PHASE_COLUMNS]
    headers.append("clock offset (ms)")
    return Table(headers, rows, numeric=tuple(range(2, len(headers))))


def slowest_table(data: ReportData) -> Table | None:
    """The slowest requests by client TTFT, each with its phases in ms (– where no
    span joined); None without server spans."""
    if not data.slowest:
        return None
    columns = (*[c for c in PHASE_COLUMNS if c[0] != "client_minus_server_ttft"], ("server_ttft", "server TTFT"))
    rows = []
    for r in data.slowest:
        worker = "" if r.worker is None else f"w{r.worker}·"
        cells = [r.config, r.label, f"{worker}{r.id}", fmt.num(r.ttft_s, scale=1e3)]
        cells += [fmt.num(r.phases_s.get(name), scale=1e3) for name, _ in columns]
        rows.append(cells)
    headers = ["configuration", "load", "request", "TTFT (ms)", *[f"{title} (ms)" for _, title in columns]]
    return Table(headers, rows, numeric=tuple(range(3, len(headers))))


FLEET_CAPTION = (
    "Each replica of a fleet behind a router, over the point's window. Requests: those whose response named the "
    "replica (a router's or proxy's header), with their TTFT, E2E, output tokens/s and SLO attainment; routed: "
    "the router's own count of requests it sent there; running, KV use, prefix-cache hits and generated tokens: "
    "the replica's own counters. Imbalance: the busiest replica's figure over the mean (1 = even; N replicas: one "
    "took all), over the basis named."
)


def fleet_table(data: ReportData) -> Table | None:
    """Points by replica: a fleet's per-replica requests, latency and counters, with the point's
    imbalance; None without a fleet."""
    if not data.replicas:
        return None

    def pct(value: float | None) -> str:
        return fmt.num(value * 100 if value is not None else None, digits=0)

    rows = [
        [
            r.config,
            r.label,
            r.replica,
            str(r.requests) if r.requests is not None else fmt.num(None),
            fmt.num(r.routed_requests, digits=0),
            fmt.num(r.ttft_p50_s, scale=1e3),
            fmt.num(r.ttft_p90_s, scale=1e3),
            fmt.num(r.e2e_p90_s, scale=1e3),
            fmt.num(r.output_tokens_per_s),
            pct(r.good_fraction),
            fmt.num(r.running_mean, digits=2),
            pct(r.kv_usage_mean),
            pct(r.prefix_cache_hit_rate),
            fmt.num(r.generated_tokens, digits=0),
            f"{fmt.num(r.imbalance_max_over_mean, digits=2)} ({r.imbalance_over})"
            if r.imbalance_over
            else fmt.num(None),
        ]
        for r in data.replicas
    ]
    headers = [
        "configuration",
        "load",
        "replica",
        "requests",
        "routed",
        "TTFT p50 (ms)",
        "TTFT p90 (ms)",
        "E2E p90 (ms)",
        "output tok/s",
        "SLO met %",
        "running mean",
        "KV used %",
        "prefix hits %",
        "generated tok",
        "imbalance max/mean",
    ]
    return Table(headers, rows, numeric=tuple(range(3, 14)))


def groups_table(data: ReportData) -> Table | None:
    """Points by LoRA adapter, class and tenant: per group its share, TTFT,
    TPOT, E2E, output throughput and SLO attainment, Jain's index on the tenants' rows; None
    without groups."""
    if not data.groups:
        return None
    rows = [
        [
            g.config,
            g.label,
            g.kind,
            g.name,
            str(g.requests),
            fmt.num(g.share * 100 if g.share is not None else None, digits=0),
            fmt.num(g.ttft_p50_s, scale=1e3),
            fmt.num(g.ttft_p90_s, scale=1e3),
            fmt.num(g.tpot_p50_s, scale=1e3),
            fmt.num(g.e2e_p90_s, scale=1e3),
            fmt.num(g.output_tokens_per_s),
            fmt.num(g.good_fraction * 100 if g.good_fraction is not None else None, digits=0),
            fmt.num(g.jain_index, digits=3),
        ]
        for g in data.groups
    ]
    headers = [
        "configuration",
        "load",
        "group",
        "name",
        "requests",
        "share %",
        "TTFT p50 (ms)",
        "TTFT p90 (ms)",
        "TPOT p50 (ms)",
        "E2E p90 (ms)",
        "output tok/s",
        "SLO met %",
        "Jain's index",
    ]
    return Table(headers, rows, numeric=tuple(range(4, 13)))


def _pick_text(p: Pick | None) -> str:
    if p is None:
        return NULL_TEXT
    text = f"{p.config}: {fmt.stat(p.stat, p.metric)}"
    if p.runner_up is not None:
        lead = {True: "clear lead", False: "within the 95% CIs", None: "one trial: no CI"}[p.clear]
        text += f" (next {p.runner_up}: {fmt.stat(p.runner_up_stat, p.metric)}; {lead})"
    return text


def best_table(verdict: Verdict) -> Table | None:
    if not verdict.loads:
        return None
    rows = []
    for lv in verdict.loads:
        stable = NULL_TEXT
        if lv.most_stable is not None:
            s = lv.most_stable
            stable = (
                f"{s.config}: CV {fmt.num(s.cv.mean, 1, 100)}%"
                + (f" ± {fmt.num(s.cv.ci95, 1, 100)}" if s.cv.ci95 is not None else "")
                + f", change {fmt.percent(s.change.mean)}"
            )
        rows.append(
            [
                lv.label,
                str(lv.configs),
                _pick_text(lv.best_ttft),
                _pick_text(lv.best_throughput),
                stable,
            ]
        )
    headers = [
        "load",
        "configurations",
        "best TTFT (mean)",
        "best throughput (output tok/s)",
        "most stable (CV of windowed tok/s)",
    ]
    if any(lv.cheapest is not None for lv in verdict.loads):  # some configuration was priced
        headers.append("cheapest (USD per 1M output tokens)")
        rows = [row + [_pick_text(lv.cheapest)] for row, lv in zip(rows, verdict.loads)]
    return Table(headers, rows)


def slo_table(verdict: Verdict) -> Table | None:
    if not verdict.slo:
        return None
    rows = [
        [
            s.config,
            s.label,
            fmt.stat(s.good_fraction, GOOD_FRACTION),
            fmt.stat(s.goodput_per_s, GOODPUT_PER_S),
            {True: "met", False: "missed", None: NULL_TEXT}[s.met],
        ]
        for s in verdict.slo
    ]
    return Table(
        ["configuration", "load", "good requests", "goodput", f"SLO (≥ {SLO_ATTAINMENT:.0%} good)"],
        rows,
        numeric=(2, 3),
    )


def saturation_table(verdict: Verdict, data: ReportData) -> Table | None:
    rate_configs = list(dict.fromkeys(r.config for r in data.rows if r.load_kind == "rate"))
    if not rate_configs:
        return None
    sat = {s.config: s for s in verdict.saturation}
    rows = []
    for c in rate_configs:
        s = sat.get(c)
        rows.append([c, s.label if s else "not reached", s.reason if s else NULL_TEXT])
    return Table(["configuration", "saturation point", "why"], rows)


def stability_table(verdict: Verdict) -> Table | None:
    """One line per configuration and load, over its trials (each trial's timeline is drawn)."""
    if not verdict.stability_summary:
        return None

    def pm(st: TrialStat, digits: int = 1, scale: float = 1.0) -> str:
        text = fmt.num(st.mean, digits, scale)
        return text + (f" ± {fmt.num(st.ci95, digits, scale)}" if st.ci95 is not None and st.mean is not None else "")

    rows = []
    for s in verdict.stability_summary:
        change = fmt.percent(s.change.mean) + (
            f" ± {fmt.num(s.change.ci95, 1, 100)}" if s.change.ci95 is not None else ""
        )
        flag = (f"DEGRADED in {s.degraded_runs} of {s.runs}" if s.runs > 1 else "DEGRADED") if s.degraded_runs else "ok"
        rows.append(
            [
                s.config,
                s.label,
                str(s.runs),
                s.basis,
                pm(s.head_tokens_per_s),
                pm(s.tail_tokens_per_s),
                change,
                pm(s.cv, 1, 100),
                flag,
                f"{fmt.num(s.head_ttft_s.mean, 0, 1e3)} → {fmt.num(s.tail_ttft_s.mean, 0, 1e3)}",
            ]
        )
    return Table(
        [
            "configuration",
            "load",
            "runs",
            "compared",
            "head tok/s",
            "tail tok/s",
            "change",
            "CV %",
            f"flag (drop over {DEGRADATION_THRESHOLD:.0%})",
            "TTFT mean head → tail (ms)",
        ],
        rows,
        numeric=(2, 4, 5, 6, 7, 9),
    )


def _cache_line(c: CacheFlag) -> str:
    why = (
        "the cache held prefixes from before the point (an earlier point or run; "
        "--prefix-cache reset starts each point cold)"
        if c.above
        else "the cache reused less than the workload shares (evictions, a too-small cache, or prompts that "
        "did not share blocks as the workload says)"
    )
    return (
        f"{c.config} at {c.label}: prefix-cache hit rate {fmt.num(c.hit_rate, 1, 100)}% vs the workload's "
        f"expected reuse {fmt.num(c.expected_reuse, 1, 100)}%, more than {CACHE_REUSE_TOLERANCE:.0%} apart: {why}."
    )


def _client_line(c: ClientFlag) -> str:
    trials = "" if c.share >= 1 else f" in {c.share:.0%} of its trials"
    return (
        f"{c.config} at {c.label}: the client, not the server, set these numbers{trials} (client CPU max "
        f"{fmt.num(c.cpu_util_max, 0, 100)}% of a core, loop lag p99 {fmt.num(c.loop_lag_p99_s, 1, 1e3)} ms; "
        f"limits {CPU_LIMIT:.0%}, {LOOP_LAG_LIMIT_S * LAG_MARGIN * 1e3:g} ms): {advice_for(c.cpu_util_max is not None and c.cpu_util_max > CPU_LIMIT, c.cpu_util_max)}."
    )


def verdict_lines(verdict: Verdict, data: ReportData) -> list[str]:
    """The verdict in sentences, one per finding, each with its numbers."""
    if not data.rows:
        return ["No load point finished, so nothing was measured: see the cells or runs that did not finish."]
    lines = [f.sentence() for f in verdict.failed]  # the server failed these: said first, with its error
    if len(verdict.failed) == len(data.rows):
        return ["Every point failed: the server did not serve the load, so nothing was measured.", *lines]
    if len({r.config for r in data.rows}) < 2:
        lines.append("One configuration: nothing to pick between; its numbers are in the headline table.")
    for lv in verdict.loads:
        if lv.configs < 2:
            continue  # a load only one configuration ran: no "best"
        parts = []
        if lv.best_ttft:
            parts.append("best TTFT " + _pick_text(lv.best_ttft))
        if lv.best_throughput:
            parts.append("best throughput " + _pick_text(lv.best_throughput))
        if lv.most_stable:
            s = lv.most_stable
            parts.append(f"most stable {s.config} (CV {fmt.num(s.cv.mean, 1, 100)}%)")
        if parts:
            lines.append(f"At {lv.label}: " + "; ".join(parts) + ".")
    for q in verdict.quality:
        lines.append(
            f"At {q.label}: {q.fast.config} has the {q.picked_for} but answers worse, {q.fast.correct}/"
            f"{q.fast.graded} right ({q.fast.accuracy:.1%}) against {q.accurate.config}'s {q.accurate.correct}/"
            f"{q.accurate.graded} ({q.accurate.accuracy:.1%}; two-proportion p = {q.p:.2g}): faster, not better."
        )
    for sat in verdict.saturation:
        lines.append(f"{sat.config} saturates at {sat.label}: {sat.reason}.")
    lines += [_client_line(c) for c in verdict.client]
    lines += [_cache_line(c) for c in verdict.cache]
    degraded = [s for s in verdict.stability_summary if s.degraded_runs]
    for d in degraded:
        trials = f" in {d.degraded_runs} of {d.runs} trials" if d.runs > 1 else ""
        lines.append(
            f"{d.config} at {d.label}: steady-state output rate fell{trials}, by "
            f"{fmt.num(d.change.mean, 1, -100)}% on average ({fmt.num(d.head_tokens_per_s.mean)} → "
            f"{fmt.num(d.tail_tokens_per_s.mean)} tok/s, {d.basis})."
        )
    if verdict.stability and not degraded:
        lines.append(f"No run's steady-state output rate fell by more than {DEGRADATION_THRESHOLD:.0%}.")
    if verdict.slo:
        for config, label in verdict.highest_load_meeting_slo.items():
            lines.append(
                f"{config} meets the SLO (≥ {SLO_ATTAINMENT:.0%} good requests) up to {label}."
                if label
                else f"{config} meets the SLO at no measured load."
            )
    elif any(slo_text(s) for s in data.slos):
        lines.append("An SLO was set but no point reported goodput.")
    else:
        lines.append("No SLO was set (tokenbench run --slo ttft=500ms,tpot=50ms): goodput not measured.")
    return lines
