"""`--images` and `--image-size` as the settings read them: a count or range, and sizes in pixels."""

from __future__ import annotations

import re

MAX_IMAGE_SIDE = 8192  # pixels: a larger synthetic image is a typo, not a workload


def parse_image_count(text: str) -> tuple[int, int]:
    """``--images``: ``N`` (every request N images) or ``LO-HI`` (a uniform draw per request)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m:
        raise ValueError(f"--images {text!r}: give a count N or a range LO-HI, e.g. --images 2 or --images 1-4")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise ValueError(f"--images {text}: the range's high end {hi} is below its low end {lo}")
    if hi == 0:
        raise ValueError("--images 0 sends no image: drop the flag for text-only requests")
    return lo, hi


def parse_image_sizes(text: str) -> list[tuple[int, int]]:
    """``--image-size``: ``WxH``, or a comma-separated list of them drawn per image."""
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", part)
        if not m:
            raise ValueError(f"--image-size {text!r}: give WxH in pixels, e.g. 512x512 (or a list: 256x256,1024x768)")
        w, h = int(m.group(1)), int(m.group(2))
        if not (0 < w <= MAX_IMAGE_SIDE and 0 < h <= MAX_IMAGE_SIDE):
            raise ValueError(f"--image-size {part.strip()}: each side must be 1 to {MAX_IMAGE_SIDE} pixels")
        sizes.append((w, h))
    return sizes
