"""datasets/images.py through build_requests: seeded synthetic images on any dataset's prompts,
a JSONL row's own images, and the API check."""

import json

import pytest

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests
from tokenbench.datasets import images as dataset_images
from tokenbench.datasets.chat_images import data_url, synthetic_image
from tokenbench.datasets.images import check_api
from tokenbench.errors import BadInput


def build(**kw):
    return build_requests(DatasetConfig(input_tokens=8, num_prompts=20, **kw), None, seed=3)[0]


def test_synthetic_images_are_seeded_per_request_within_the_range():
    one = build(images="1-3", image_size="32x32,16x8")
    assert one == build(images="1-3", image_size="32x32,16x8")  # same seed, same pixels
    counts = [len(r.images) for r in one]
    assert set(counts) == {1, 2, 3}
    for r in one:
        assert all(u.startswith("data:image/png;base64,") for u in r.images)
        assert r.image_pixels is not None and len(r.images) * 128 <= r.image_pixels <= len(r.images) * 1024
    assert len({u for r in one for u in r.images}) == sum(counts)  # every image distinct
    other = build_requests(DatasetConfig(input_tokens=8, num_prompts=20, images="1-3"), None, seed=4)[0]
    assert [r.images for r in other] != [r.images for r in one]
    assert [r.prompt for r in build()] == [r.prompt for r in one]  # the text is the text run's


def test_fixed_count_and_jpeg():
    reqs = build(images="2", image_size="20x10", image_format="jpeg")
    assert {len(r.images) for r in reqs} == {2} and {r.image_pixels for r in reqs} == {400}
    assert reqs[0].images[0].startswith("data:image/jpeg;base64,")


def test_past_the_memory_budget_images_are_reused_in_turn(monkeypatch):
    url = data_url(synthetic_image(__import__("numpy").random.default_rng(0), 16, 16, "png"), "png")
    monkeypatch.setattr(dataset_images, "IMAGE_BYTES_BUDGET", 3 * len(url))
    reqs = build(images="1", image_size="16x16")
    urls = [r.images[0] for r in reqs]
    assert len(set(urls)) == 3 and urls[3:6] == urls[:3] and urls[6:9] == urls[:3]
    assert {r.image_pixels for r in reqs} == {256}


def test_a_jsonl_rows_images_files_and_urls(tmp_path):
    png = synthetic_image(__import__("numpy").random.default_rng(0), 4, 5, "png")
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(png)
    rows = [
        {"prompt": "describe", "images": ["img/a.png", "img/a.png"]},
        {"messages": [{"role": "user", "content": "and this"}], "images": ["https://example.com/b.jpg"]},
        {"prompt": "text only"},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    reqs = build_requests(DatasetConfig(name="jsonl", path=path, output_tokens=5), None, seed=0)[0]
    by_text = {r.as_prompt_text(): r for r in reqs}
    assert by_text["describe"].images == (data_url(png, "png"),) * 2 and by_text["describe"].image_pixels == 40
    assert by_text["and this"].images == ("https://example.com/b.jpg",) and by_text["and this"].image_pixels is None
    assert by_text["text only"].images == () and by_text["describe"].max_tokens == 5


@pytest.mark.parametrize(
    ("images", "message"),
    [(["missing.png"], "missing.png"), ("a.png", "'images' must be a list"), ([3], "'images' must be a list")],
)
def test_a_bad_jsonl_images_value_names_the_line(tmp_path, images, message):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "x", "images": images}))
    with pytest.raises(BadInput, match=message) as exc:
        build_requests(DatasetConfig(name="jsonl", path=path), None, seed=0)
    assert "d.jsonl:1" in str(exc.value)


def test_images_need_the_chat_api_and_a_prompt_dataset():
    reqs = build(images="1", image_size="8x8")
    check_api(reqs, "chat")
    with pytest.raises(BadInput, match="use --api chat"):
        check_api(reqs, "completions")
    check_api(build(), "completions")  # text only: any API
    with pytest.raises(BadInput, match="use --api chat"):
        check_api([], "completions", "1")  # sessions: their requests are made as they run
    with pytest.raises(ValueError, match="--images"):
        DatasetConfig(name="trace", path="t.jsonl", images="1")
