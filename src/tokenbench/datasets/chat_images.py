"""Images in chat requests: the flags' values, synthetic images, data URLs, and
the chat message that carries them.

A request's images (``Request.images``) are URLs: ``data:image/...;base64,...`` for images made
here or read from disk, or an ``http(s)://`` URL a dataset gave, sent as it is. On the wire they
are OpenAI ``image_url`` content parts after the last user message's text, in the order vLLM's
``vllm bench serve`` sends them::

    {"role": "user", "content": [{"type": "text", "text": "..."},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}]}

Synthetic images are uniform random pixels (as vLLM's random multimodal dataset makes them), drawn
from a numpy generator seeded by the run's seed and the image's index: the same seed gives the same
pixels, and so the same bytes. Pillow (a dependency of matplotlib) encodes them as PNG or JPEG.
The flags' parsers are config/images.py's.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MIME = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp", "bmp": "image/bmp"}


def synthetic_image(rng: np.random.Generator, width: int, height: int, fmt: str) -> bytes:
    """Uniform random RGB pixels from ``rng``, encoded as ``fmt`` (png or jpeg)."""
    from PIL import Image

    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    if fmt == "png":
        Image.fromarray(pixels, "RGB").save(out, format="PNG", compress_level=1)
    else:
        Image.fromarray(pixels, "RGB").save(out, format="JPEG", quality=85)
    return out.getvalue()


def data_url(data: bytes, fmt: str) -> str:
    return f"data:{MIME.get(fmt, 'application/octet-stream')};base64,{base64.b64encode(data).decode('ascii')}"


def image_file(path: Path) -> tuple[str, int]:
    """A local image file as a data URL, and its pixels (width x height, read by Pillow)."""
    from PIL import Image, UnidentifiedImageError

    data = path.read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt, (w, h) = (img.format or "").lower(), img.size
    except UnidentifiedImageError:
        raise ValueError(f"{path}: not an image Pillow can read") from None
    return data_url(data, fmt), w * h


def is_url(text: str) -> bool:
    """An image a dataset gives as a URL (sent as it is) rather than a file to read."""
    return text.startswith(("http://", "https://", "data:"))


def chat_messages(messages: Sequence[dict[str, str]], images: Sequence[str]) -> list[dict[str, Any]]:
    """``messages`` with ``images`` as image_url content parts after the last user message's text
    (a conversation without a user message gets one, with no text)."""
    out: list[dict[str, Any]] = list(messages)
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in images]
    for i in range(len(out) - 1, -1, -1):
        if out[i].get("role") == "user":
            out[i] = {**out[i], "content": [{"type": "text", "text": out[i]["content"]}, *parts]}
            return out
    return [*out, {"role": "user", "content": parts}]
