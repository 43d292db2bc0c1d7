"""Number formatting shared by the HTML, Markdown and console renderings.

A missing number is always NULL_TEXT ("–"), never 0: a run where nothing streamed has no TTFT.
"""

from __future__ import annotations

import html
import math

from .load import Stat

NULL_TEXT = "–"

# Per metric: scale from stored unit to shown unit, the shown unit, digits.
METRIC_DISPLAY: dict[str, tuple[float, str, int, str]] = {
    "output_tokens_per_s": (1.0, "tok/s", 1, "output throughput"),
    "requests_per_s": (1.0, "req/s", 2, "request rate"),
    "offered_per_s": (1.0, "req/s", 2, "offered rate (scheduled in window)"),
    "ttft_s_mean": (1e3, "ms", 1, "TTFT mean"),
    "ttft_s_p50": (1e3, "ms", 1, "TTFT p50"),
    "ttft_s_p99": (1e3, "ms", 1, "TTFT p99"),
    "tpot_s_mean": (1e3, "ms", 2, "TPOT mean"),
    "itl_s_mean": (1e3, "ms", 2, "ITL mean"),
    "e2e_s_mean": (1e3, "ms", 1, "E2E mean"),
    "queue_s_mean": (1e3, "ms", 2, "queue delay mean"),
    "goodput_per_s": (1.0, "req/s", 2, "goodput"),
    "good_fraction": (100.0, "%", 1, "good"),
    "error_rate": (100.0, "%", 1, "errors"),
    "server_preemptions": (1.0, "", 0, "server preemptions"),
    "server_ttft_s_mean": (1e3, "ms", 1, "server TTFT mean"),
    "server_kv_usage_max": (100.0, "%", 1, "server KV usage max"),
}


def num(value: float | None, digits: int = 1, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NULL_TEXT
    return f"{value * scale:,.{digits}f}"


def seconds(value: float | None) -> str:
    return NULL_TEXT if value is None else f"{value:.1f} s"


def percent(value: float | None, digits: int = 1) -> str:
    return NULL_TEXT if value is None else f"{value * 100:+.{digits}f}%"


def stat(s: Stat | None, metric: str, unit: bool = True) -> str:
    """'123.4 ± 5.6 ms' (CI shown when there is one), or '–'."""
    if s is None or s.mean is None:
        return NULL_TEXT
    scale, shown_unit, digits, _ = METRIC_DISPLAY.get(metric, (1.0, "", 2, metric))
    text = num(s.mean, digits, scale)
    if s.ci95 is not None:
        text += f" ± {num(s.ci95, digits, scale)}"
    if unit and shown_unit:
        text += ("" if shown_unit == "%" else " ") + shown_unit
    return text


def metric_title(metric: str) -> str:
    _, unit, _, title = METRIC_DISPLAY.get(metric, (1.0, "", 2, metric))
    return f"{title} ({unit})" if unit else title


def esc(text: object) -> str:
    """HTML-escape anything that came from a file, a server or a dataset."""
    return html.escape("" if text is None else str(text), quote=True)


def md(text: object) -> str:
    """Escape for a Markdown table cell or line: HTML-escaped (renderers pass raw HTML through),
    pipes and newlines neutralised so a value cannot break a table."""
    s = html.escape("" if text is None else str(text), quote=False)
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
