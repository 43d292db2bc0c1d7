"""Request APIs against chat on the same server (the ``apis`` preset's study): per API and load,
what sending the same prompts by Anthropic's Messages or OpenAI's Responses API changed over chat
completions, with a 95% CI. Pure: report rows in, differences, sentences and tables out.

Which API a row sent by is its results' ``target.api`` (PointRow.api). A row's *baseline* is the
chat row of the same input and server configuration (same swept knobs) at the same load; rows of
separate run directories (no server label) pair by backend and load. No chat row, or several:
none (said, not guessed). Inputs without a chat row beside a Messages or Responses one have no
study.

Difference of a metric = API − chat, in the metric's stored unit and as a share of chat, with its
95% CI (paired.py: paired by trial when both sides have every planned trial, else the two CIs
combined). Better / worse: beyond the CI on the metric's better / worse side; no difference within
it; unknown with one trial.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import METRICS
from tokenbench.report.read.data import LoadKey, PointRow, ReportData, load_key
from tokenbench.report.sections.paired import Difference, Side, compared_cells, difference, load_text, pct_text, side
from tokenbench.report.sections.tables import Table
from tokenbench.results import NO_TRIALS, TrialStat

BASE_API = "chat"
OTHER_APIS = ("messages", "responses")
# What the study compares: latency (median and tail TTFT, median TPOT), throughput, and what the
# API costs the client (parsing its events) and the server (rendering them), keys of METRICS.
API_METRICS: tuple[str, ...] = (
    "ttft_s_p50",
    "ttft_s_p99",
    "tpot_s_p50",
    "output_tokens_per_s",
    "client_cpu_util_mean",
    "server_cpu_cores_mean",
)

APIS_CAPTION = (
    "Each API against chat completions on the same server, with the same prompts, at the same load: "
    "difference = API − chat (absolute, and as a share of chat), mean ± 95% CI. Paired by trial when both "
    "have every trial (trial k sends the same prompts at the same times), else the two CIs combined. "
    "Better / worse: beyond the CI; no difference: within it; unknown: one trial (no CI)."
)


@dataclass(frozen=True)
class ApiCost:
    """One metric of one API's configuration at one load, against chat's."""

    config: str  # the API's row's configuration label
    api: str
    base: str  # chat's row's configuration label
    label: str  # the load point's: "2 users"
    load_kind: str
    load_value: float | None
    metric: str  # a catalogue key
    base_stat: TrialStat
    stat: TrialStat
    diff: Difference
    side: Side


Group = tuple[str | None, str | None, str, LoadKey]


def _group(row: PointRow) -> Group:
    """Rows that differ only by their API: one experiment's server configuration (its swept
    knobs), or separate runs' backend, at one load."""
    source = row.source if row.server is not None else None
    swept = json.dumps(row.swept, sort_keys=True, default=str)
    return source, row.server or row.backend, swept, load_key(row)


def baselines(rows: tuple[PointRow, ...] | list[PointRow]) -> dict[Group, PointRow | None]:
    """Each group with a Messages or Responses row -> its one chat row (None: none or several)."""
    groups: dict[Group, list[PointRow]] = {}
    for r in rows:
        groups.setdefault(_group(r), []).append(r)
    out: dict[Group, PointRow | None] = {}
    for key, members in groups.items():
        if any(r.api in OTHER_APIS for r in members):
            chat = [r for r in members if r.api == BASE_API]
            out[key] = chat[0] if len(chat) == 1 else None
    return out


def has_study(data: ReportData) -> bool:
    return any(base is not None for base in baselines(data.rows).values())


def api_costs(data: ReportData) -> list[ApiCost]:
    """Every Messages and Responses row's difference from chat per metric, in the rows' order."""
    base_of = baselines(data.rows)
    trials = {e.name: e.trials for e in data.experiments}
    out = []
    for row in data.rows:
        base = base_of.get(_group(row))
        if base is None or row.api not in OTHER_APIS:
            continue
        for key in API_METRICS:
            base_stat, stat = base.metrics.get(key, NO_TRIALS), row.metrics.get(key, NO_TRIALS)
            if base_stat.mean is None and stat.mean is None:
                continue  # not measured on either side (an attached server's CPU)
            diff = difference(base_stat, stat, trials.get(row.source))
            out.append(
                ApiCost(
                    row.config,
                    row.api,
                    base.config,
                    row.label,
                    row.load_kind,
                    row.load_value,
                    key,
                    base_stat,
                    stat,
                    diff,
                    side(diff.delta, diff.delta_ci95, METRICS[key].higher_is_better),
                )
            )
    return out


def _load(c: ApiCost) -> str:
    return load_text(c.load_kind, c.load_value, c.label)


def api_lines(items: list[ApiCost], data: ReportData | None = None) -> list[str]:
    """Per API configuration: the metrics on which it was worse than chat beyond the CI, then
    better, each with its loads; one that was neither is said to; a group with no single chat row
    is named."""
    lines: list[str] = []
    by_config: dict[str, list[ApiCost]] = {}
    for c in items:
        by_config.setdefault(c.config, []).append(c)
    for config, group in by_config.items():
        said = len(lines)
        base = group[0].base
        for kind, word in (("worse", "worse than"), ("better", "better than")):
            for key in API_METRICS:
                chosen = [c for c in group if c.metric == key and c.side == kind]
                if chosen:
                    at = "; ".join(f"{pct_text(c.diff)} at {_load(c)}" for c in chosen)
                    lines.append(f"{config} was {word} {base} on {METRICS[key].title} ({at}).")
        if len(lines) == said:
            lines.append(
                f"{config}: one trial per configuration, so no CI: run trials to tell the API from chat."
                if all(c.side == "unknown" for c in group)
                else f"{config} made no difference beyond the 95% CI to {base} on any metric."
            )
    if data is not None:
        for (_, server, _, _), chat in baselines(data.rows).items():
            if chat is None:
                lines.append(f"{server}: no single chat configuration at that load to compare the other APIs with.")
    return lines


def api_table(items: list[ApiCost]) -> Table:
    """One row per (API configuration, load, metric): chat, the API, the difference and its side."""
    rows = [
        [
            c.config,
            c.base,
            _load(c),
            METRICS[c.metric].label,
            *compared_cells(METRICS[c.metric], c.base_stat, c.stat, c.diff, c.side),
        ]
        for c in items
    ]
    headers = ["API", "chat", "load", "metric", "chat", "API", "API − chat", "%", ""]
    return Table(headers, rows, numeric=(4, 5, 6, 7))


def apis_table(data: ReportData) -> Table | None:
    """Per configuration of the study (chat and each API) and load: the compared metrics, mean ±
    95% CI over trials; None without a study."""
    base_of = baselines(data.rows)
    if not any(b is not None for b in base_of.values()):
        return None
    metrics = [METRICS[k] for k in API_METRICS]
    rows = [
        [r.config, r.api or NULL_TEXT, r.label, str(r.num_trials)]
        + [fmt.stat(r.metrics.get(m.key), m, unit=False) for m in metrics]
        for r in data.rows
        if base_of.get(_group(r)) is not None
    ]
    headers = ["configuration", "API", "load", "trials"] + [m.label for m in metrics]
    return Table(headers, rows, numeric=tuple(range(3, 4 + len(metrics))))
