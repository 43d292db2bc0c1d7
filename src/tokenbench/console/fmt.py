"""Number formatting shared by the HTML, Markdown and console renderings.

A missing number is always NULL_TEXT ("–"), never 0: a run where nothing streamed has no TTFT.
"""

from __future__ import annotations

import html
import math

from tokenbench.metrics.catalogue import Metric
from tokenbench.results import TrialStat

NULL_TEXT = "–"


def num(value: float | None, digits: int = 1, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NULL_TEXT
    return f"{value * scale:,.{digits}f}"


def scaled(value: float | None, scale: float) -> float | None:
    """A stored number in its shown unit (``scale``: e.g. 1e3 for seconds shown in ms); None stays None."""
    return None if value is None else value * scale


def seconds(value: float | None) -> str:
    return NULL_TEXT if value is None else f"{value:.1f} s"


def percent(value: float | None, digits: int = 1) -> str:
    return NULL_TEXT if value is None else f"{value * 100:+.{digits}f}%"


def stat(s: TrialStat | None, metric: Metric, unit: bool = True) -> str:
    """'123.4 ± 5.6 ms' (CI shown when there is one), or '–'; scale, digits and unit are the
    metric's (catalogue.METRICS)."""
    if s is None or s.mean is None:
        return NULL_TEXT
    text = num(s.mean, metric.digits, metric.scale)
    if s.ci95 is not None:
        text += f" ± {num(s.ci95, metric.digits, metric.scale)}"
    if unit and metric.unit:
        text += ("" if metric.unit == "%" else " ") + metric.unit
    return text


def esc(text: object) -> str:
    """HTML-escape anything that came from a file, a server or a dataset."""
    return html.escape("" if text is None else str(text), quote=True)


def md(text: object) -> str:
    """Escape for a Markdown table cell or line: HTML-escaped (renderers pass raw HTML through),
    pipes and newlines neutralised so a value cannot break a table."""
    s = html.escape("" if text is None else str(text), quote=False)
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
