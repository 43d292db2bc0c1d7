"""Experiment files carry images: in the dataset, or per variant beside a text one."""

import pytest

from tokenbench.experiments.spec import ExperimentError, expand, parse_spec

BASE = {
    "name": "t",
    "backends": [{"backend": "xllamacpp"}],
    "load": {"users": [1]},
    "stop": {"duration_s": 5},
    "trials": 1,
}


def test_a_variant_with_images_beside_a_text_one():
    variants = [
        {"label": "text"},
        {"label": "images", "images": "1-2", "image_size": "256x256", "image_format": "jpeg"},
    ]
    cells = expand(parse_spec({**BASE, "variants": variants}))[0].cells
    by_variant = {c.variant: c.config.dataset for c in cells}
    assert by_variant["text"].images is None
    assert (by_variant["images"].images, by_variant["images"].image_size) == ("1-2", "256x256")
    assert by_variant["images"].image_format == "jpeg"


def test_the_dataset_may_carry_images_and_a_bad_value_names_the_field():
    cells = expand(parse_spec({**BASE, "dataset": {"images": "2", "image_size": "64x64"}}))[0].cells
    assert {c.config.dataset.images for c in cells} == {"2"}
    with pytest.raises(ExperimentError, match="--images"):
        parse_spec({**BASE, "variants": [{"label": "x", "images": "many"}]})
