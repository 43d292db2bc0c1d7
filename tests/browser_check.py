"""Open a report in headless Chromium (Debian's binary, driven by playwright; never a downloaded
browser) and say what a person would see: console/page errors, network attempts, dialogs, each
chart's drawn marks, and how colourful the page and each chart are (a blank screenshot has ~1).

Shared by tests/report/test_report_browser.py and tests/e2e/test_presets.py.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# No network side-channels of its own: without these flags Chromium's background connections are
# refused by this machine's closed network, many at a time.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

CHART_STATE = """() => [...document.querySelectorAll('.plotly-graph-div')].map(d => ({
    id: d.id,
    svgs: d.querySelectorAll('svg.main-svg').length,
    marks: [...d.querySelectorAll('.trace path')]
        .filter(p => (p.getAttribute('d') || '').length > 2).length,
}))"""


def require_browser() -> None:
    """Skip without Chromium or playwright, except under CI (CI set), where that fails."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (run scripts/ensure_chromium.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install -e '.[browser]')")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def distinct_colors(png: bytes) -> int:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colors = image.getcolors(maxcolors=1 << 20)
    return len(colors) if colors is not None else 1 << 20


@dataclass
class BrowserCheck:
    errors: list[str] = field(default_factory=list)  # console errors, page errors, network attempts
    dialogs: list[str] = field(default_factory=list)
    charts: list[dict] = field(default_factory=list)  # {id, svgs, marks, colors}
    distinct_colors: int = 0  # of the full-page screenshot
    body_text: str = ""
    titles: list[str] = field(default_factory=list)  # plotly chart titles as rendered text
    bold_elements: int = 0


def check_in_chromium(html: Path, screenshot: Path | None = None) -> BrowserCheck:
    require_browser()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    check = BrowserCheck()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: check.errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: check.errors.append(str(e)))
            page.on("dialog", lambda d: (check.dialogs.append(d.message), d.dismiss()))
            # Offline: any request leaving file:// would be a missing inline asset.
            page.route(
                "http*://**", lambda route: (check.errors.append(f"network request {route.request.url}"), route.abort())
            )
            page.goto(html.as_uri(), wait_until="load")
            try:  # plotly draws asynchronously after load; wait until every chart has marks
                page.wait_for_function(f"() => ({CHART_STATE})().every(c => c.marks > 0)", timeout=30_000)
            except PlaywrightTimeout:
                pass  # the caller's assertions say which chart stayed empty
            check.charts = page.evaluate(CHART_STATE)
            for chart in check.charts:
                chart["colors"] = distinct_colors(page.locator(f"#{chart['id']}").screenshot())
            shot = page.screenshot(full_page=True)
            if screenshot is not None:
                screenshot.write_bytes(shot)
            check.distinct_colors = distinct_colors(shot)
            check.body_text = page.inner_text("body")
            check.titles = page.evaluate("() => [...document.querySelectorAll('.gtitle')].map(t => t.textContent)")
            check.bold_elements = page.evaluate("() => document.querySelectorAll('b').length")
        finally:
            browser.close()
    return check
