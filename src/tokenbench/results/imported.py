"""results.json's ``imported``: a run directory made from another tool's result file
(``tokenbench import``). Its points are tokenbench's own figures over the tool's requests; this
part keeps what the tool itself said of them, figure by figure, beside tokenbench's, with the
definition that explains a difference (imports/definitions.py)."""

from __future__ import annotations

from pydantic import Field

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number

# what the difference of a figure is where the source kept no request (``Imported.aggregate_only``)
NO_REQUESTS = "no requests in the source"


class ImportedFigure(FrozenModel):
    """One of the tool's headline figures of a point beside tokenbench's over the same requests."""

    metric: str = Field(description="tokenbench's catalogue key of the figure compared (ttft_s_mean, ...)")
    tool_name: str = Field(description="the tool's own name for its figure (mean_ttft_ms)")
    tool_value: Number | None = Field(description="the tool's figure, in tokenbench's stored unit (s, 1/s)")
    tokenbench_value: Number | None = Field(description="tokenbench's figure of the same requests")
    difference: Number | None = Field(description="(tool − tokenbench) / tokenbench; None without both")
    same_definition: bool = Field(description="the two formulas agree: a difference is the tool's arithmetic")
    definition: str = Field(description="how the tool computes it, and how that differs from tokenbench")


class ImportedPoint(FrozenModel):
    index: int
    figures: list[ImportedFigure]
    warnings: list[str] = Field(
        default_factory=list,
        description="what the file shows went wrong in this benchmark (a schedule the tool did not keep, its own "
        "warnings): its figures may not be of the load the point names",
    )
    requests: int | None = Field(
        default=None, description="the tool's count of requests sent, where it kept none of them (aggregate_only)"
    )
    failures: int | None = Field(
        default=None, description="the tool's count of failed requests, where it kept none of them (aggregate_only)"
    )


class Imported(FrozenModel):
    """Where an imported run came from, and how its tool's figures compare with tokenbench's."""

    tool: str = Field(description="the tool that measured the run (vllm-bench-serve, ...)")
    version: str | None = Field(description="the tool's version, where its file says")
    file: str = Field(description="the imported file's name")
    sha256: str
    imported_by: str = Field(description="the tokenbench version that imported it")
    not_recorded: list[str] = Field(description="record keys the tool has no data for: absent, never guessed")
    points: list[ImportedPoint]
    aggregate_only: bool = Field(
        default=False,
        description="the file held the tool's aggregates only, no request (a Benchmark Report): the points have no "
        "records and no tokenbench figures (None); report, compare and the gate read the tool's (figures[].tool_value)",
    )
    measured_by: str | None = Field(
        default=None, description="the tool that measured the figures, where the file names it (a Benchmark Report's)"
    )

    def figure(self, index: int, metric: str) -> float | None:
        """The tool's figure ``metric`` (a catalogue key, "ttft_s_p90") of point ``index``; None
        when it gave none."""
        for point in self.points:
            if point.index == index:
                return next(
                    (float(f.tool_value) for f in point.figures if f.metric == metric and f.tool_value is not None),
                    None,
                )
        return None
