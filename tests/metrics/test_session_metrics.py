"""Session metrics from hand-made records: by_turn groups a population by turn index, and the
expected reuse is the histories' share of the prompts over ok session records."""

import pytest

from tokenbench.metrics import by_turn, session_expected_reuse
from tokenbench.records import Outcome, RequestRecord, SessionTurn


def _rec(i, turn, history, prompt, ttft, outcome=Outcome.OK, session="s-0", server_prompt=True):
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=0.0,
        sent_s=1.0,
        chunk_times_s=[1.0 + ttft, 2.0],
        end_s=2.0,
        outcome=outcome,
        prompt_tokens=prompt if server_prompt else None,
        dataset_prompt_tokens=None if server_prompt else prompt,
        session=SessionTurn(session, turn, history),
    )


def test_by_turn_counts_every_outcome_and_measures_the_ok_ones():
    records = [
        _rec(0, 0, 0, 10, 0.1),
        _rec(1, 0, 0, 12, 0.3, session="s-1", server_prompt=False),  # the dataset's count
        _rec(2, 1, 20, 30, 0.05),
        _rec(3, 1, 22, 34, 9.0, outcome=Outcome.HTTP_ERROR, session="s-1"),
    ]
    first, second = by_turn(records)
    assert (first.turn_index, first.count, second.turn_index, second.count) == (0, 2, 1, 2)
    assert first.ttft_s.mean == pytest.approx(0.2) and first.prompt_tokens.mean == 11
    assert second.ttft_s.count == 1 and second.ttft_s.max == pytest.approx(0.05)  # the failed turn is not measured
    assert second.e2e_s.mean == 1.0 and second.prompt_tokens.max == 30
    assert by_turn([RequestRecord(point=0, id=9, scheduled_s=0.0)]) == []  # not a session record


def test_expected_reuse_is_history_over_prompt_tokens_of_ok_session_records():
    records = [
        _rec(0, 0, 0, 10, 0.1),
        _rec(1, 1, 20, 30, 0.1),
        _rec(2, 2, 50, 60, 0.1),
        _rec(3, 2, 50, 60, 0.1, outcome=Outcome.TIMEOUT),  # not ok: left out
        RequestRecord(point=0, id=4, scheduled_s=0.0, outcome=Outcome.OK, prompt_tokens=100),  # not a session's
    ]
    assert session_expected_reuse(records) == 70 / 100
    assert session_expected_reuse(records[3:]) is None


def test_expected_reuse_counts_the_previous_turn_as_the_server_counted_it():
    """Turn 1's cached prefix is turn 0's prompt and reply as the server counted them, less the
    reply's last token (never fed back): 10 + 8 - 1 = 17 of its 30, not its text history of 15."""
    records = [_rec(0, 0, 0, 10, 0.1), _rec(1, 1, 15, 30, 0.1)]
    records[0].output_tokens = 8
    assert session_expected_reuse(records, records) == 17 / 40
    assert session_expected_reuse(records[1:], records) == 17 / 30  # the window had turn 1 only
    assert session_expected_reuse(records) == 15 / 40  # without the point's records: the text history
