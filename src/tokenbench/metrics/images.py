"""Images sent in chat requests over a point's population.

Counted from the records (``RequestRecord.image_input``: ``images``, ``image_pixels``): the requests
that carried images, their images and pixels, and images served per second by the request rate's
own rule:

    images_per_s = requests_per_s x (images of the successful requests / successful requests)

so it reads like ``requests_per_s`` (closed loop: requests by their share of life in the window;
open loop: over the rate period). ``prompt_tokens`` is the server's usage (images included:
what an engine charges for an image) over the successful requests with images. Added to a point
only when some request of its population carried images: a text run keeps its results.json shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenbench.metrics.stats import distribution
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import Images


def image_metrics(population: Sequence[RequestRecord], requests_per_s: float | None) -> dict[str, Any]:
    """``images`` of a point (PointMetrics' field), or nothing when no request carried images."""
    carried = [(r, r.image_input) for r in population if r.image_input is not None and r.image_input.images]
    if not carried:
        return {}
    images = sum(part.images or 0 for _, part in carried)
    pixels = [part.image_pixels for _, part in carried]
    known = None if any(p is None for p in pixels) else sum(p or 0 for p in pixels)
    ok_images = [r for r, _ in carried if r.outcome is Outcome.OK]
    ok = sum(1 for r in population if r.outcome is Outcome.OK)
    per_ok = sum(r.image_input.images or 0 for r in ok_images if r.image_input is not None) / ok if ok else None
    return {
        "images": Images(
            requests=len(carried),
            images=images,
            images_per_request=images / len(carried),
            image_pixels=known,
            pixels_per_image=known / images if known is not None else None,
            images_per_s=requests_per_s * per_ok if requests_per_s is not None and per_ok is not None else None,
            ok_requests=len(ok_images),
            prompt_tokens=distribution(r.prompt_tokens for r in ok_images if r.prompt_tokens is not None),
        )
    }
