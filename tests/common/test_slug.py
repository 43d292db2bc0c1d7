"""slug: one function for experiment labels and cell ids (kept as they were: directories on disk,
resume finds cells by them) and the report's chart ids (letters and digits only)."""

from tokenbench.common.slug import MAX_CHARS, slug
from tokenbench.config import EngineKnobs


def test_a_label_keeps_its_key_value_parts():
    assert slug("vllm_max_num_seqs=64_kv_memory=0.5") == "vllm_max_num_seqs=64_kv_memory=0.5"
    assert slug("vllm-llamacpp__no system prompt__t0") == "vllm-llamacpp__no-system-prompt__t0"


def test_each_run_of_other_characters_is_one_dash_and_the_ends_are_trimmed():
    assert slug("  a / b:c  ") == "a-b-c"
    assert slug("é a") == "a"


def test_nothing_left_is_x_and_a_long_name_is_cut():
    assert slug("///") == "x"
    assert slug("") == "x"
    assert slug("a" * 200) == "a" * MAX_CHARS


def test_letters_and_digits_only_for_a_chart_id():
    assert slug("max_num_seqs", keep="") == "max-num-seqs"
    assert slug("kv_memory", keep="") == "kv-memory"


def test_every_knob_gives_the_chart_id_it_had():
    # the report's own slug before it was this one: each non-alphanumeric character one "-"
    def before(text: str) -> str:
        return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"

    for knob in EngineKnobs.model_fields:
        assert slug(knob.lower(), keep="") == before(knob)
