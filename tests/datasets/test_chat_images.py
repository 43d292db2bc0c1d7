"""images.py: the flags' values, seeded synthetic images, data URLs and the chat message parts."""

import base64
import io

import numpy as np
import pytest
from PIL import Image

from tokenbench.config.images import parse_image_count, parse_image_sizes
from tokenbench.datasets.chat_images import chat_messages, data_url, image_file, synthetic_image


def test_counts_and_sizes_parse_and_bad_ones_name_the_flag():
    assert parse_image_count("2") == (2, 2)
    assert parse_image_count("1-4") == (1, 4)
    assert parse_image_sizes("512x512") == [(512, 512)]
    assert parse_image_sizes("256x128, 64X32") == [(256, 128), (64, 32)]
    for bad in ("x", "4-1", "0", "-2"):
        with pytest.raises(ValueError, match="--images"):
            parse_image_count(bad)
    for bad in ("512", "0x10", "10x99999", "axb"):
        with pytest.raises(ValueError, match="--image-size"):
            parse_image_sizes(bad)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_a_synthetic_image_is_seeded_and_of_its_size(fmt):
    one = synthetic_image(np.random.default_rng([7, 0, 0]), 48, 32, fmt)
    same = synthetic_image(np.random.default_rng([7, 0, 0]), 48, 32, fmt)
    other = synthetic_image(np.random.default_rng([8, 0, 0]), 48, 32, fmt)
    assert one == same and one != other
    with Image.open(io.BytesIO(one)) as img:
        assert img.size == (48, 32) and img.format == fmt.upper()


def test_a_data_url_decodes_to_the_bytes_and_a_file_reads_as_one(tmp_path):
    data = synthetic_image(np.random.default_rng(1), 10, 20, "png")
    url = data_url(data, "png")
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == data
    (tmp_path / "a.png").write_bytes(data)
    assert image_file(tmp_path / "a.png") == (url, 200)
    (tmp_path / "b.png").write_text("not an image")
    with pytest.raises(ValueError, match="not an image"):
        image_file(tmp_path / "b.png")


def test_images_follow_the_last_user_text_as_image_url_parts():
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "what is this?"},
    ]
    out = chat_messages(messages, ["data:image/png;base64,AAAA", "https://example.com/x.jpg"])
    assert out[:3] == messages[:3]
    assert out[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.jpg"}},
        ],
    }
    assert messages[3]["content"] == "what is this?"  # the request's own messages are not changed
