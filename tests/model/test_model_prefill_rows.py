"""The fit's TPOT rows: which prompts were prefilled during a request's decode. Users sent together
are prefilled in one batch (llama.cpp and vLLM alike) and their first tokens come out of one step,
read by the client a millisecond or two apart; the later-read one was not prefilled during the
other's decode. Counting it (the live llama.cpp fit of 1 and 2 users) made every 2-user TPOT row
look like a prefill that cost nothing: the per-sequence cost came out 0 and the prefill cost
halved (3.8 ms a token, 12 ms a sequence and ~7 ms a token measured)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.model.fit import prefill_during_decode
from tokenbench.model.observe import PointObs

STEP_S = 0.030


def _point(sent, first, chunks, prompt):
    sent, first, chunks = np.array(sent, float), np.array(first, float), np.array(chunks, float)
    last = first + (chunks - 1) * STEP_S
    n = len(sent)
    return PointObs(
        run="r", index=0, label="x", sent=sent, first=first, last=last, chunks=chunks,
        prompt=np.array(prompt, float), output=chunks, kv_scrapes=[], prompt_extra=np.zeros(n),
    )  # fmt: skip


def test_users_prefilled_in_one_step_read_ms_apart_prefill_nothing_during_each_others_decode():
    # two users sent together, first tokens of one step read 0, 1.5 ms apart (a tenth of a step: 3 ms)
    p = _point(sent=[0.0, 0.0], first=[0.500, 0.5015], chunks=[17, 17], prompt=[94, 94])
    assert prefill_during_decode(p).tolist() == [0.0, 0.0]


def test_a_prompt_whose_first_token_came_mid_decode_counts_per_step():
    # the third request's first token came 5 steps into the first two's decodes: its 64 prompt
    # tokens were prefilled during them, spread over their 16 decode steps
    p = _point(sent=[0.0, 0.0, 0.1], first=[0.500, 0.5015, 0.650], chunks=[17, 17, 17], prompt=[94, 94, 64])
    got = prefill_during_decode(p)
    assert got[:2] == pytest.approx([64 / 16, 64 / 16])
    assert got[2] == 0.0  # nothing came out after it
