"""The dataset table (datasets/__init__): every name has a builder, the system prompt, prefixes."""

import pytest

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests


def test_system_prompt_from_file_becomes_a_system_message(tmp_path):
    sp = tmp_path / "system.txt"
    sp.write_text("You are terse.")
    reqs, info = build_requests(DatasetConfig(num_prompts=1, system_prompt=f"@{sp}"), None, 0)
    assert reqs[0].messages[0] == {"role": "system", "content": "You are terse."}
    assert info.system_prompt
    with pytest.raises(FileNotFoundError, match="no such file"):
        build_requests(DatasetConfig(system_prompt="@/nonexistent/file"), None, 0)


def test_every_dataset_name_and_api_has_one_entry_in_its_table():
    """A new dataset is a module and a line in datasets.SOURCES (a trace, replayed row by row, is
    datasets.trace_plan; agent programs, run session by session, datasets.programs); a new
    protocol a line in WIRES."""
    from typing import get_args

    from tokenbench.clients import WIRES
    from tokenbench.config import Api, DatasetName
    from tokenbench.datasets import SOURCES

    assert set(SOURCES) | {"trace", "programs"} == set(get_args(DatasetName))
    assert set(WIRES) == set(get_args(Api))
