"""Paired outputs as types (``Agreement``: agreement.json, written by `tokenbench agree` into the
first run directory, and each comparison of the determinism study in its experiment directory);
metrics/agreement.py computes them, its doc says how."""

from __future__ import annotations

from tokenbench.common.frozen import FrozenModel


class PairedReply(FrozenModel):
    """One request and its twin."""

    prompt_hash: str
    id_a: int
    id_b: int
    identical: bool
    first_diff_char: int | None  # None: identical
    first_diff_word: int | None
    similarity: float  # over all the words (1.0: identical)
    rest_similarity: float | None  # over the words from the first differing one (None: identical)


class PointAgreement(FrozenModel):
    """A pair of points' answers: side A's point ``point_a`` against side B's ``point_b``."""

    point_a: int
    point_b: int
    label: str  # what the two points are ("1 user vs 8 users")
    pairs: int
    identical: int
    share_identical: float | None  # None: no pairs
    share_ci95: tuple[float, float] | None  # Wilson 95% interval of share_identical
    unpaired_a: int
    unpaired_b: int
    first_diff_word_median: float | None  # over the pairs that differ
    rest_similarity_mean: float | None  # over the pairs that differ
    requests: list[PairedReply]

    @property
    def changed(self) -> int:
        return self.pairs - self.identical


class Agreement(FrozenModel):
    """Paired outputs of two runs (or two points of one), point by point."""

    a: str
    b: str
    points: list[PointAgreement]
