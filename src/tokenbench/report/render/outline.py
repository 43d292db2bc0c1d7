"""The report's outline, built once and drawn by every renderer: its sections in order, each with
a title, a caption, blocks (a heading, facts, sentences, a table) and charts. ``html.py`` and
``markdown.py`` walk the same ``ReportOutline``, so the two documents list the same sections,
tables and numbers. Captions quote the named thresholds of ``verdict.py`` and ``stability.py``.

Where the documents differ on purpose, the outline says so: the page explains more (``caption``),
report.md is the short summary (``md_caption``; a section with ``in_md=False`` is the page's
only), and report.md links every chart's PNG at its end instead of drawing charts in sections.
Text here is raw (unescaped); each renderer escapes for its medium.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.report.chart_spec import MAX_TIMESERIES_CHARTS, Chart
from tokenbench.report.read.data import ReportData
from tokenbench.report.read.run_dir import SLOWEST_REQUESTS
from tokenbench.report.sections.accuracy import ACCURACY_CAPTION, accuracy_table
from tokenbench.report.sections.agreement import AGREEMENT_CAPTION, agreements_table
from tokenbench.report.sections.apis import APIS_CAPTION, api_costs, api_lines, api_table, apis_table
from tokenbench.report.sections.capacity import (
    ATTAINMENT_CAPTION,
    CAPACITY_CAPTION,
    attainment_table,
    capacity_lines,
    capacity_table,
)
from tokenbench.report.sections.imported import IMPORTED_CAPTION, imported_table, imported_warnings
from tokenbench.report.sections.layers import LAYERS_CAPTION, layer_lines, layers_table, overhead_table, overheads
from tokenbench.report.sections.pooling import POOLING_CAPTION, pooling_table
from tokenbench.report.sections.programs import (
    CALL_GROUPS_CAPTION,
    PARTS_CAPTION,
    PROGRAMS_CAPTION,
    SESSIONS_CAPTION,
    call_groups_table,
    parts_table,
    programs_table,
    sessions_table,
)
from tokenbench.report.sections.scaling import LAGS_CAPTION, TIMELINE_CAPTION, lags_table, timeline_table
from tokenbench.report.sections.speculation import SPECULATION_CAPTION, speculation_table
from tokenbench.report.sections.speculation_speedup import (
    SPEEDUP_CAPTION,
    speculation_values_table,
    speedup_lines,
    speedup_table,
    speedups,
)
from tokenbench.report.sections.stability import DEGRADATION_THRESHOLD, MINUTE_BASIS_MIN_STEADY_S
from tokenbench.report.sections.stages import STAGES_CAPTION, stages_table
from tokenbench.report.sections.structured import STRUCTURED_CAPTION, structured_table
from tokenbench.report.sections.tables import (
    FLEET_CAPTION,
    Table,
    best_table,
    experiment_facts,
    failed_cells_table,
    fleet_table,
    groups_table,
    headline_table,
    images_table,
    phases_table,
    runs_table,
    saturation_table,
    servers_table,
    slo_table,
    slowest_table,
    stability_table,
    turns_table,
    verdict_lines,
)
from tokenbench.report.sections.verdict import SATURATION_ACHIEVED_FRACTION, SATURATION_TTFT_FACTOR, Verdict, slo_text


@dataclass(frozen=True)
class Block:
    """A heading and what follows it, in this order: caption, facts, sentences, text, table."""

    heading: str = ""
    level: int = 3
    md_heading: str | None = None  # report.md's: None = the heading; "" = none; else a plain line
    caption: str = ""  # the page's explanation
    md_caption: str = ""  # report.md's
    facts: tuple[tuple[str, str], ...] = ()  # name: value
    lines: tuple[str, ...] = ()  # sentences, one per finding (a list)
    text: str = ""  # one paragraph, in both documents
    table: Table | None = None


@dataclass(frozen=True)
class Section:
    key: str  # the page's anchor
    title: str
    blocks: tuple[Block, ...] = ()
    short_title: str | None = None  # in the page's navigation and as report.md's heading; None = the title
    caption: str = ""
    md_caption: str = ""
    charts: tuple[Chart, ...] = ()
    empty: str = ""  # the page's text when the section has no table and no chart
    note: str = ""  # the page's closing remark
    in_md: bool = True


@dataclass(frozen=True)
class ReportOutline:
    sources: tuple[str, ...]  # the inputs' names
    sections: tuple[Section, ...]
    charts: tuple[Chart, ...]  # every chart, in the order the PNGs are written


_CHART_SECTIONS = (
    ("capacity", "Capacity: SLO attainment vs load"),
    ("load", "Latency and throughput vs load"),
    ("knobs", "Engine settings"),
    ("tradeoff", "Latency–throughput trade-off"),
    ("errors", "Errors"),
)

HEADLINE_CAPTION = (
    "Per configuration and load: mean over trials ± 95% CI half-width (no CI with one trial). Latencies "
    "over successful requests in the measurement window; – means not measured."
)
BEST_CAPTION = (
    "Best TTFT: lowest mean TTFT. Best throughput: highest output tokens/s. A lead is clear when the two "
    "95% confidence intervals do not overlap. Most stable: lowest coefficient of variation of the "
    "steady-state windowed output tokens/s (mean over trials)."
)
SATURATION_RULE = (
    f"First offered rate whose median TTFT exceeds {SATURATION_TTFT_FACTOR:g}x the lowest rate's, or whose "
    f"achieved request rate is below {SATURATION_ACHIEVED_FRACTION:.0%} of the arrivals scheduled in its window."
)
STABILITY_CAPTION = (
    "Steady state = windows after ramp-up and warm-up and before the load stopped. Head vs tail: the first "
    f"and last minute with at least {MINUTE_BASIS_MIN_STEADY_S / 60:g} minutes of steady state, else the "
    "first and last third of the windows. Flagged when the tail's output rate is more than "
    f"{DEGRADATION_THRESHOLD:.0%} below the head's."
)


GROUPS_CAPTION = (
    "Each point's requests by LoRA adapter, workload-mix class and tenant, over the point's window "
    "population: latencies of the successful ones, output throughput, and SLO met (the class's own "
    "objectives, else the run's) of those that ended. Jain's index across tenants: (sum x)^2 / "
    "(n sum x^2) with x a tenant's goodput over its share of the requests (1: all served alike)."
)
TURNS_CAPTION = (
    "Each turn of a conversation sends the whole history (earlier turns and the server's own replies): "
    "a prefix cache serves that history, so TTFT by turn shows whether it does. Over the point's "
    "measurement window; TTFT over successful requests; prompt tokens are the server's where it reports them."
)


PHASES_CAPTION = (
    "Each request joined to the server's own span by its traceparent (--server-traces): sent→server is the "
    "client's send to the server's arrival; frontend the server's TTFT less its queue and prefill (its API "
    "server, tokenization, the hand-off to the engine); queue, prefill and decode are the server's; delivery is the server's "
    "first token to the client's first chunk; client−server TTFT is the client's TTFT less the server's. Per "
    "phase the median, then the mean over the slowest 1% of requests by TTFT. A request without a span counts in "
    "none (joined %). The clock offset places the server's wall clock on the run's, bounded by the join."
)
SLOWEST_CAPTION = (
    f"Each run's (an experiment's: each configuration's, over its cells) {SLOWEST_REQUESTS} slowest successful "
    "requests by the client's TTFT (sent to first chunk), "
    "over every point with server spans (warm-up and drain included), slowest first, with their phases "
    "(records.jsonl joined to server_spans.jsonl as the results join them). request: its worker and id "
    "in records.jsonl. – where no span joined (a span that never came or came late): never guessed."
)
IMAGES_CAPTION = (
    "Points whose requests carried images (chat image_url parts). images/s: the request rate times the "
    "mean images of a successful request; prompt tokens are the server's usage, the images' tokens "
    "included; TTFT over every successful request of the point. Megapixels: – when an image was a URL."
)


def build_outline(data: ReportData, verdict: Verdict, charts: list[Chart]) -> ReportOutline:
    """The report's sections in order: inputs, verdict, headline numbers, the chart sections
    that have charts (errors always), stability over time."""
    headline = headline_table(data)
    stability = stability_table(verdict)
    sections = [
        Section("inputs", "What was benchmarked", _input_blocks(data), short_title="Inputs"),
        Section("verdict", "Verdict", _verdict_blocks(data, verdict)),
        Section(
            "headline",
            "Headline numbers",
            (Block(table=headline),) if headline is not None else (),
            caption=HEADLINE_CAPTION,
            md_caption="Mean over trials ± 95% CI half-width; – means not measured.",
            empty="No load point finished.",
            in_md=headline is not None,
        ),
    ]
    sections += _layer_sections(data)
    sections += _speedup_sections(data)
    sections += _api_sections(data)
    sections += _agreement_sections(data)
    sections += _imported_sections(data)
    pooling = pooling_table(data)  # pooling APIs: only with pooling points
    if pooling is not None:
        sections.append(
            Section("pooling", "Embeddings, rerank and score", (Block(table=pooling),), caption=POOLING_CAPTION)
        )
    stages = stages_table(data)  # staged points: stage by stage, with the backlog
    if stages is not None:
        sections.append(
            Section("stages", "Stages", (Block(table=stages),), caption=STAGES_CAPTION, md_caption=STAGES_CAPTION)
        )
    turns = turns_table(data)
    if turns is not None:
        sections.append(
            Section("turns", "TTFT by turn (multi-turn sessions)", (Block(table=turns),), caption=TURNS_CAPTION)
        )
    images = images_table(data)  # images: only when some point sent images
    if images is not None:
        sections.append(Section("images", "Images", (Block(table=images),), caption=IMAGES_CAPTION))
    phases = phases_table(data)  # server spans: only when some point was joined to server spans
    if phases is not None:
        blocks = [Block(table=phases)]
        slowest = slowest_table(data)
        if slowest is not None:
            blocks.append(Block("Slowest requests", caption=SLOWEST_CAPTION, md_caption=SLOWEST_CAPTION, table=slowest))
        sections.append(
            Section(
                "phases",
                "Where the time went (server spans)",
                tuple(blocks),
                caption=PHASES_CAPTION,
                charts=tuple(c for c in charts if c.section == "phases"),
            )
        )
    sections += _program_sections(data, charts)
    groups = groups_table(data)  # routing
    if groups is not None:
        sections.append(
            Section("groups", "By adapter, class and tenant", (Block(table=groups),), caption=GROUPS_CAPTION)
        )
    fleet = fleet_table(data)  # only a fleet's points
    if fleet is not None:
        sections.append(Section("fleet", "Fleet: by replica", (Block(table=fleet),), caption=FLEET_CAPTION))
    timeline = timeline_table(data)  # autoscaling: only when some run polled a scaler
    if timeline is not None:
        blocks = [Block(table=timeline)]
        lags = lags_table(data)
        if lags is not None:
            blocks.append(Block("Scale-up lags", caption=LAGS_CAPTION, md_caption=LAGS_CAPTION, table=lags))
        sections.append(Section("scaling", "Autoscaling: replicas over time", tuple(blocks), caption=TIMELINE_CAPTION))
    structured = structured_table(data)  # only when some point asked for structure
    if structured is not None:
        sections.append(
            Section("structured", "Structured output", (Block(table=structured),), caption=STRUCTURED_CAPTION)
        )
    graded = accuracy_table(data)  # only when some point was graded (a dataset with expected answers)
    if graded is not None:
        sections.append(Section("accuracy", "Accuracy", (Block(table=graded),), caption=ACCURACY_CAPTION))
    speculation = speculation_table(data)  # only when some point reported speculation
    if speculation is not None:
        sections.append(
            Section("speculation", "Speculative decoding", (Block(table=speculation),), caption=SPECULATION_CAPTION)
        )
    sections += _chart_sections(data, charts)
    hidden = max(0, len(data.series) - MAX_TIMESERIES_CHARTS)
    sections.append(
        Section(
            "stability",
            "Stability over time",
            (Block(table=stability),),
            caption=STABILITY_CAPTION,
            charts=tuple(c for c in charts if c.section == "timeseries"),
            note=f"{hidden} more run(s) are in the table but not drawn." if hidden else "",
            in_md=stability is not None,
        )
    )
    sources = tuple([h.name for h in data.runs] + [e.name for e in data.experiments])
    return ReportOutline(sources, tuple(sections), tuple(charts))


def _program_sections(data: ReportData, charts: list[Chart]) -> list[Section]:
    """Agent programs: sessions, where their time went, calls by role and depth, the slowest
    sessions and the slowest one's timeline (none without a programs point)."""
    table = programs_table(data)
    if table is None:
        return []
    blocks = [Block(table=table)]
    parts = parts_table(data)
    if parts is not None:
        blocks.append(
            Block("Where the time went (critical path)", caption=PARTS_CAPTION, md_caption=PARTS_CAPTION, table=parts)
        )
    groups = call_groups_table(data)
    if groups is not None:
        blocks.append(
            Block("Calls by role and depth", caption=CALL_GROUPS_CAPTION, md_caption=CALL_GROUPS_CAPTION, table=groups)
        )
    sessions = sessions_table(data)
    if sessions is not None:
        blocks.append(Block("Slowest sessions", caption=SESSIONS_CAPTION, md_caption=SESSIONS_CAPTION, table=sessions))
    return [
        Section(
            "programs",
            "Agent programs",
            tuple(blocks),
            caption=PROGRAMS_CAPTION,
            md_caption=PROGRAMS_CAPTION,
            charts=tuple(c for c in charts if c.section == "programs"),
        )
    ]


def _layer_sections(data: ReportData) -> list[Section]:
    """The engine alone vs behind serving layers (none without a layer configuration)."""
    values = layers_table(data)
    if values is None:
        return []
    items = overheads(data)
    blocks = (
        Block(lines=tuple(layer_lines(items, data))),
        Block("Per configuration and load", caption=HEADLINE_CAPTION, table=values),
        Block(
            "Overhead over the engine alone",
            caption=LAYERS_CAPTION,
            md_caption=LAYERS_CAPTION,
            table=overhead_table(items),
        ),
    )
    return [Section("layers", "Serving layers vs the engine alone", blocks, short_title="Serving layers")]


def _speedup_sections(data: ReportData) -> list[Section]:
    """Speculative decoding vs the same engine without it (none without the speculation tags)."""
    values = speculation_values_table(data)
    if values is None:
        return []
    items = speedups(data)
    blocks = (
        Block(lines=tuple(speedup_lines(items, data))),
        Block("Per configuration and load", caption=HEADLINE_CAPTION, table=values),
        Block(
            "Speedup over the engine without speculation",
            caption=SPEEDUP_CAPTION,
            md_caption=SPEEDUP_CAPTION,
            table=speedup_table(items),
        ),
    )
    return [
        Section("speculation-speedup", "Speculative decoding vs without it", blocks, short_title="Speculation speedup")
    ]


def _api_sections(data: ReportData) -> list[Section]:
    """Messages and Responses vs chat on the same server (none without a chat row beside them)."""
    values = apis_table(data)
    if values is None:
        return []
    items = api_costs(data)
    blocks = (
        Block(lines=tuple(api_lines(items, data))),
        Block("Per configuration and load", caption=HEADLINE_CAPTION, table=values),
        Block("Each API against chat", caption=APIS_CAPTION, md_caption=APIS_CAPTION, table=api_table(items)),
    )
    return [Section("apis", "Request APIs vs chat", blocks, short_title="Request APIs")]


def _agreement_sections(data: ReportData) -> list[Section]:
    """Paired outputs: the same prompts' greedy answers, twin by twin (none without agreement.json)."""
    table = agreements_table(data.agreements)
    if table is None:
        return []
    block = Block(caption=AGREEMENT_CAPTION, md_caption=AGREEMENT_CAPTION, table=table)
    return [Section("paired-outputs", "Paired outputs: the same answers?", (block,), short_title="Paired outputs")]


def _imported_sections(data: ReportData) -> list[Section]:
    """Runs imported from another tool: its figures beside tokenbench's (none without one)."""
    table = imported_table(data)
    if table is None:
        return []
    blocks = [Block(caption=IMPORTED_CAPTION, md_caption=IMPORTED_CAPTION, table=table)]
    if warnings := imported_warnings(data):
        blocks.append(Block("Warnings in the imported files", level=4, lines=tuple(warnings)))
    return [
        Section("imported", "Imported runs: the tool's figures vs tokenbench's", tuple(blocks), short_title="Imported")
    ]


def _input_blocks(data: ReportData) -> tuple[Block, ...]:
    blocks = []
    if data.runs:
        blocks.append(Block("Runs", md_heading="", table=runs_table(data)))
    for exp in data.experiments:
        blocks.append(Block(f"Experiment {exp.name}", facts=tuple(experiment_facts(exp))))
        blocks.append(Block("Server configurations", level=4, md_heading="", table=servers_table(exp)))
        failed = failed_cells_table(exp)
        if failed is not None:
            blocks.append(
                Block("Cells that did not finish", level=4, md_heading="Cells that did not finish:", table=failed)
            )
    return tuple(blocks)


def _verdict_blocks(data: ReportData, verdict: Verdict) -> tuple[Block, ...]:
    blocks = [*_capacity_blocks(data), Block(lines=tuple(verdict_lines(verdict, data)))]
    best = best_table(verdict)
    if best is not None:
        blocks.append(Block("Best at each load", caption=BEST_CAPTION, table=best))
    if verdict.slo:
        slos = [t for t in (slo_text(s) for s in data.slos) if t]
        text = f"SLO: {'; '.join(slos)}." if slos else ""
        blocks.append(Block("Service-level objectives", text=text, table=slo_table(verdict)))
    saturation = saturation_table(verdict, data)
    if saturation is not None:
        blocks.append(Block("Saturation", md_caption=SATURATION_RULE, table=saturation))
    return tuple(blocks)


def _capacity_blocks(data: ReportData) -> list[Block]:
    """Capacity searches first: the ranking, then SLO attainment vs load (none without searches)."""
    if not data.capacities:
        return []
    entries = data.capacities
    return [
        Block(
            "Capacity under the SLO",
            caption=CAPACITY_CAPTION,
            md_caption=CAPACITY_CAPTION,
            lines=tuple(capacity_lines(entries)),
            table=capacity_table(entries),
        ),
        Block(
            "SLO attainment vs load",
            caption=ATTAINMENT_CAPTION,
            md_caption=ATTAINMENT_CAPTION,
            table=attainment_table(entries),
        ),
    ]


def _chart_sections(data: ReportData, charts: list[Chart]) -> list[Section]:
    """One section per kind of chart drawn; errors always (saying there were none)."""
    present = {c.section for c in charts}
    no_errors = (
        "No failed requests: every request of every point ended ok." if data.rows else "No requests were measured."
    )
    return [
        Section(
            key,
            title,
            charts=tuple(c for c in charts if c.section == key),
            empty=no_errors if key == "errors" else "",
            in_md=False,
        )
        for key, title in _CHART_SECTIONS
        if key in present or key == "errors"
    ]
