"""Images on a dataset's requests: synthetic ones (``--images``, ``--image-size``,
``--image-format``) or a JSONL row's own ``images`` list.

Synthetic: request i draws its count (uniform in ``--images LO-HI``) and each image's size (one of
``--image-size``'s) from ``numpy.random.default_rng([seed, i])``, and image j's pixels from
``default_rng([seed, i, j])``: the same seed gives the same images, request by request. Every
image is distinct (a server's multimodal cache never sees one twice) until the images made reach
``IMAGE_BYTES_BUDGET`` of data URLs; the requests after that reuse the first ones in turn (the
requests are held in memory for the whole run: 1000 prompts of one 512x512 PNG are ~1 GB).

Multi-turn sessions: each turn's new user message carries its own images (drawn as above, turns
numbered across conversations in order); the history re-sends the earlier turns' text, not their
images.

Trace rows that ask images (Azure's 2025 multimodal trace: NumImages) get that many, made with
the request (``image_set``) in ``--image-size``/``--image-format``: a replay holds none.

JSONL: a row's ``"images": [...]`` holds http(s) or data URLs (sent as they are; their pixels
unknown) or paths of image files (relative to the dataset file's folder), read and sent as data URLs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np

from tokenbench.config import CONVERSATION_APIS, DatasetConfig
from tokenbench.config.images import parse_image_count, parse_image_sizes
from tokenbench.datasets.chat_images import data_url, image_file, is_url, synthetic_image
from tokenbench.errors import BadInput
from tokenbench.records import Request

IMAGE_BYTES_BUDGET = 256 * 2**20  # distinct synthetic images' data URLs held at most (bytes)


def synthetic_image_sets(n: int, cfg: DatasetConfig, seed: int) -> list[tuple[tuple[str, ...], int]]:
    """For items 0..n-1 (requests, or a conversation's turns), each one's seeded synthetic images
    (data URLs) and their pixels in all (``cfg.images`` is set)."""
    assert cfg.images is not None
    lo, hi = parse_image_count(cfg.images)
    sizes = parse_image_sizes(cfg.image_size)
    fmt = cfg.image_format
    made: list[tuple[str, int]] = []  # (data URL, pixels) in the order made
    held = reused = 0
    out = []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        urls, pixels = [], 0
        for j in range(int(rng.integers(lo, hi + 1))):
            w, h = sizes[int(rng.integers(len(sizes)))]
            if held < IMAGE_BYTES_BUDGET:
                url, n_pixels = data_url(synthetic_image(np.random.default_rng([seed, i, j]), w, h, fmt), fmt), w * h
                made.append((url, n_pixels))
                held += len(url)
            else:  # the budget is spent: reuse what was made, in turn
                url, n_pixels = made[reused % len(made)]
                reused += 1
            urls.append(url)
            pixels += n_pixels
        out.append((tuple(urls), pixels))
    return out


def image_set(
    n: int, image_size: str, image_format: Literal["png", "jpeg"], key: tuple[int, ...]
) -> tuple[tuple[str, ...], int]:
    """``n`` seeded synthetic images for one request (a trace row asking ``n``: Azure's
    NumImages), image j's size (one of ``image_size``'s) and pixels drawn from
    ``default_rng([*key, j])``: made when the request is, held by nobody after it is sent."""
    sizes = parse_image_sizes(image_size)
    urls, pixels = [], 0
    for j in range(n):
        rng = np.random.default_rng([*key, j])
        w, h = sizes[int(rng.integers(len(sizes)))]
        urls.append(data_url(synthetic_image(rng, w, h, image_format), image_format))
        pixels += w * h
    return tuple(urls), pixels


def with_synthetic_images(requests: list[Request], cfg: DatasetConfig, seed: int) -> list[Request]:
    """``requests`` each with its seeded synthetic images (``cfg.images`` is set)."""
    sets = synthetic_image_sets(len(requests), cfg, seed)
    return [replace(r, images=urls, image_pixels=px) if urls else r for r, (urls, px) in zip(requests, sets)]


def row_images(value: object, base: Path, where: str) -> tuple[tuple[str, ...], int | None]:
    """A JSONL row's ``images``: the URLs to send and their pixels in all (None when some image
    is a URL, whose size is not read)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadInput(f"{where}: 'images' must be a list of image file paths or URLs")
    urls: list[str] = []
    pixels: int | None = 0
    for item in value:
        if is_url(item):
            urls.append(item)
            pixels = None
            continue
        path = Path(item) if Path(item).is_absolute() else base / item
        try:
            url, n = image_file(path)
        except OSError as exc:
            raise BadInput(f"{where}: image {item}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
        urls.append(url)
        pixels = None if pixels is None else pixels + n
    return tuple(urls), pixels


def check_api(requests: list[Request], api: str | None, images: str | None = None) -> None:
    """Images go in a conversation API's content parts (chat's image_url, Messages' image blocks,
    Responses' input_image): any other API is an error before anything is sent (``images``:
    --images, for a source whose requests are made later: sessions)."""
    if api not in CONVERSATION_APIS and (images is not None or any(r.images for r in requests)):
        raise BadInput(
            f"images are sent as a conversation's content parts: use --api chat, messages or responses, not --api {api}"
        )
