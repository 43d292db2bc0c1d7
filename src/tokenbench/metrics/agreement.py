"""Paired outputs: did two runs that sent the same prompts (greedy, --keep-text) give the same
answers? Pure: records in, an Agreement out.

Each request of one side is matched to its twin on the other by its prompt's identity (the
record's ``prompt_hash``, written with --keep-text): the k-th request of a prompt on one side
(by record id) with the k-th of the same prompt on the other. Only replies that both ended ok
are compared; the rest are counted apart (``unpaired_a`` / ``unpaired_b``: no twin, or no ok
reply with text).

A pair is identical when the texts are equal. Otherwise it diverges at its first differing
character (``first_diff_char``) and its first differing word (``first_diff_word``: words are the
whitespace-split text; records keep no output token ids, so the word stands in for the token:
the mock's words are its tokens). ``rest_similarity`` is difflib's SequenceMatcher ratio
(2 * matches / total, autojunk off) over the words from the first differing one on, on both sides;
``similarity`` the same over all the words. The population: the paired requests; the share
identical comes with its Wilson 95% interval (metrics/accuracy.py's, as accuracy's). The types: results/agreement.py.
"""

from __future__ import annotations

import difflib
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence

from tokenbench.metrics.accuracy import wilson_interval
from tokenbench.records import RequestRecord
from tokenbench.results.agreement import Agreement, PairedReply, PointAgreement


def _keyed(records: Iterable[RequestRecord]) -> tuple[dict[tuple[str, int], RequestRecord], int]:
    """The ok replies with text by (prompt_hash, occurrence), and how many others there were."""
    seen: dict[str, int] = defaultdict(int)
    keyed, others = {}, 0
    for r in sorted(records, key=lambda r: r.id):
        if not r.ok or r.output_text is None or r.prompt_hash is None:
            others += 1
            continue
        keyed[(r.prompt_hash, seen[r.prompt_hash])] = r
        seen[r.prompt_hash] += 1
    return keyed, others


def paired_reply(key: str, a: RequestRecord, b: RequestRecord) -> PairedReply:
    text_a, text_b = a.output_text or "", b.output_text or ""
    words_a, words_b = text_a.split(), text_b.split()
    identical = text_a == text_b
    word = None if identical else len(os.path.commonprefix([words_a, words_b]))
    return PairedReply(
        prompt_hash=key,
        id_a=a.id,
        id_b=b.id,
        identical=identical,
        first_diff_char=None if identical else len(os.path.commonprefix([text_a, text_b])),
        first_diff_word=word,
        similarity=1.0 if identical else _ratio(words_a, words_b),
        rest_similarity=None if word is None else _ratio(words_a[word:], words_b[word:]),
    )


def _ratio(a: Sequence[str], b: Sequence[str]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def point_agreement(
    a: Iterable[RequestRecord], b: Iterable[RequestRecord], point_a: int, point_b: int, label: str
) -> PointAgreement:
    """One point's replies against the other's, twin by twin."""
    keyed_a, others_a = _keyed(a)
    keyed_b, others_b = _keyed(b)
    both = [k for k in keyed_a if k in keyed_b]
    requests = [paired_reply(k[0], keyed_a[k], keyed_b[k]) for k in both]
    identical = sum(p.identical for p in requests)
    differ = [p for p in requests if not p.identical]
    words = sorted(p.first_diff_word for p in differ if p.first_diff_word is not None)
    rests = [p.rest_similarity for p in differ if p.rest_similarity is not None]
    n = len(requests)
    return PointAgreement(
        point_a=point_a,
        point_b=point_b,
        label=label,
        pairs=n,
        identical=identical,
        share_identical=identical / n if n else None,
        share_ci95=wilson_interval(identical, n),
        unpaired_a=others_a + len(keyed_a) - n,
        unpaired_b=others_b + len(keyed_b) - n,
        first_diff_word_median=_median(words),
        rest_similarity_mean=sum(rests) / len(rests) if rests else None,
        requests=requests,
    )


def _median(values: Sequence[int]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return float(values[mid]) if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def by_point(records: Iterable[RequestRecord]) -> dict[int, list[RequestRecord]]:
    points: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        points[r.point].append(r)
    return dict(points)


def runs_agreement(
    a_name: str, b_name: str, a: Iterable[RequestRecord], b: Iterable[RequestRecord], labels: dict[int, str]
) -> Agreement:
    """Two runs' paired outputs, their points paired by index (point i against point i); a point
    only one side has is left out. ``labels``: each point's label (its load)."""
    points_a, points_b = by_point(a), by_point(b)
    common = sorted(points_a.keys() & points_b.keys())
    return Agreement(
        a=a_name,
        b=b_name,
        points=[point_agreement(points_a[p], points_b[p], p, p, labels.get(p, f"point {p}")) for p in common],
    )
