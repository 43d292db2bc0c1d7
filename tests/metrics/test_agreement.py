"""metrics/agreement.py: twins by prompt hash, where two replies first differ, how alike the rest
is, and the share identical with its Wilson interval (known answers)."""

from __future__ import annotations

import pytest

from tokenbench.metrics.accuracy import wilson_interval as wilson_ci95
from tokenbench.metrics.agreement import paired_reply, point_agreement
from tokenbench.records import Outcome, RequestRecord


def _record(i: int, key: str | None, text: str | None, outcome: Outcome = Outcome.OK) -> RequestRecord:
    r = RequestRecord(point=0, id=i, scheduled_s=0.0, outcome=outcome)
    r.output_text, r.prompt_hash = text, key
    return r


def test_a_pair_diverges_at_its_first_differing_word_and_character():
    p = paired_reply("k", _record(1, "k", " hi hi hi hi"), _record(2, "k", " hi hi ho ho"))
    assert (p.identical, p.first_diff_word, p.first_diff_char) == (False, 2, 8)  # " hi hi h" in common
    assert p.rest_similarity == 0.0  # ho ho vs hi hi: nothing in common after it
    assert p.similarity == pytest.approx(0.5)  # 2 * 2 matching words / 8
    same = paired_reply("k", _record(1, "k", "a b"), _record(2, "k", "a b"))
    assert (same.identical, same.first_diff_word, same.similarity, same.rest_similarity) == (True, None, 1.0, None)


def test_twins_pair_by_prompt_and_occurrence_whatever_the_order_sent():
    """The same prompt twice on each side pairs first with first; a prompt only one side has, a
    failed reply and a reply without text are unpaired."""
    a = [_record(1, "p", "x y"), _record(2, "q", "u v"), _record(3, "p", "x z"), _record(4, "r", "only a")]
    b = [
        _record(7, "q", "u v"),
        _record(5, "p", "x y"),
        _record(6, "p", "x y"),
        _record(8, "s", "only b"),
        _record(9, "q", None, Outcome.HTTP_ERROR),
    ]
    got = point_agreement(a, b, 0, 0, "1 user")
    assert (got.pairs, got.identical, got.changed) == (3, 2, 1)
    assert [(p.id_a, p.id_b, p.identical) for p in got.requests] == [(1, 5, True), (2, 7, True), (3, 6, False)]
    assert (got.unpaired_a, got.unpaired_b) == (1, 2)
    assert got.first_diff_word_median == 1.0 and got.share_identical == pytest.approx(2 / 3)


def test_the_wilson_interval_of_a_share():
    low, high = wilson_ci95(8, 10)  # the textbook case: 0.8 of 10 -> 0.490 .. 0.943
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    assert wilson_ci95(0, 0) is None
    assert wilson_ci95(10, 10)[1] == pytest.approx(1.0)
