"""Distributions: count, mean, sample std, percentiles (numpy), as results.json writes them."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tokenbench.results import Distribution

PERCENTILES = (50, 90, 95, 99, 99.9)
# p99.9 of fewer samples is the maximum by another name (numpy's linear rank n*0.999 is within one
# sample of the top): it is null below this count; p99 and max are there to read instead.
P999_MIN_COUNT = 1000


def distribution(values: Iterable[float] | np.ndarray, *, consume: bool = False) -> Distribution:
    """Count, mean, sample std, min, percentiles and max of ``values``: a numpy array (used as
    is), a list or tuple, or any iterable of floats. ``consume=True`` lets the percentiles
    reorder the array in place (no copy of a point's ITL gaps): pass it only an array nobody
    reads afterwards. The std is the sample standard deviation (n - 1), None below 2 values; p999
    is None below ``P999_MIN_COUNT`` values."""
    if isinstance(values, np.ndarray):
        arr = values.astype(np.float64, copy=False).ravel()
    elif isinstance(values, (list, tuple)):
        arr = np.array(values, dtype=np.float64)
        consume = True
    else:
        arr = np.fromiter(values, dtype=np.float64)
        consume = True
    if arr.size == 0:
        return _EMPTY
    mean = float(arr.mean())  # before the percentiles reorder it (a sum depends on the order)
    std = _sample_std(arr) if arr.size >= 2 else None
    lo, hi = float(arr.min()), float(arr.max())
    p = np.percentile(arr, PERCENTILES, overwrite_input=consume)
    return Distribution(
        count=int(arr.size),
        mean=mean,
        std=std,
        min=lo,
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
        p999=float(p[4]) if arr.size >= P999_MIN_COUNT else None,
        max=hi,
    )


class WeightedValues:
    """Values each counted an integer number of times (a chunk gap split over its n tokens: n
    times gap / n), held by that count, 8 bytes a value and never one a repeat. Its
    ``distribution`` is ``distribution(np.repeat(values, weights))``: count, min, max and the
    percentiles exactly (each rank's value found among the sorted groups, numpy's linear
    interpolation between them), mean and std up to the float rounding of a weighted sum."""

    def __init__(self) -> None:
        self._groups: dict[int, list[np.ndarray]] = {}

    def add(self, values: np.ndarray, weights: np.ndarray) -> None:
        for k in np.unique(weights).tolist():  # a Python loop per distinct count, not per value
            if k > 0:
                self._groups.setdefault(int(k), []).append(np.asarray(values[weights == k], dtype=np.float64))

    def distribution(self) -> Distribution:
        """The distribution of the values added, repeated (they are given up: sorted in place)."""
        groups = {k: _joined(parts) for k, parts in sorted(self._groups.items())}
        self._groups = {}
        n = sum(k * g.size for k, g in groups.items())
        if n == 0:
            return _EMPTY
        mean = sum(k * float(np.add.reduce(g)) for k, g in groups.items()) / n
        std = np.sqrt(sum(k * _squares(g, mean) for k, g in groups.items()) / (n - 1)) if n >= 2 else None
        for g in groups.values():
            g.sort()  # in place
        p = [_percentile(groups, n, q) for q in PERCENTILES]
        return Distribution(
            count=n,
            mean=mean,
            std=float(std) if std is not None else None,
            min=min(float(g[0]) for g in groups.values()),
            p50=p[0],
            p90=p[1],
            p95=p[2],
            p99=p[3],
            p999=p[4] if n >= P999_MIN_COUNT else None,
            max=max(float(g[-1]) for g in groups.values()),
        )


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one array, the list emptied: one copy of them alive, not two."""
    whole = np.concatenate(parts)
    parts.clear()
    return whole


def _percentile(groups: dict[int, np.ndarray], n: int, q: float) -> float:
    """numpy's linear percentile of the repeated values: rank h = (n - 1) q / 100 between the
    values at ranks floor(h) and floor(h) + 1, with numpy's _lerp (the same float steps)."""
    h = (n - 1) * np.float64(q / 100)
    lo = np.floor(h)
    t = h - lo
    a, b = _at_rank(groups, int(lo)), _at_rank(groups, min(int(lo) + 1, n - 1))
    diff = b - a
    return float(b - diff * (1 - t) if t >= 0.5 else a + diff * t)


_SIGN = np.int64(-(2**63))


def _at_rank(groups: dict[int, np.ndarray], rank: int) -> float:
    """The value at 0-based ``rank`` of the repeated sorted values: the least v with more than
    ``rank`` repeated values <= v, found by bisection over the floats' order (their bit patterns
    as ordered integers: 64 steps, each a binary search of every sorted group)."""

    def key(x: float) -> int:  # the float's place in the order of all floats, as an int
        i = int(np.float64(x).view(np.int64))
        return i if i >= 0 else int(_SIGN) - i - 1

    def value(k: int) -> np.float64:
        return np.int64(k if k >= 0 else int(_SIGN) - k - 1).view(np.float64)

    lo = key(min(float(g[0]) for g in groups.values()))
    hi = key(max(float(g[-1]) for g in groups.values()))
    while lo < hi:
        mid = (lo + hi) // 2
        v = value(mid)
        if sum(k * int(np.searchsorted(g, v, side="right")) for k, g in groups.items()) > rank:
            hi = mid
        else:
            lo = mid + 1
    return float(value(lo))


def _squares(arr: np.ndarray, mean: float) -> float:
    """The sum of squared deviations from ``mean``, a block at a time in one reused buffer."""
    buffer = np.empty(min(arr.size, _STD_BLOCK))
    total = 0.0
    for i in range(0, arr.size, _STD_BLOCK):
        x = buffer[: min(_STD_BLOCK, arr.size - i)]
        np.subtract(arr[i : i + _STD_BLOCK], mean, out=x)
        total += float(np.add.reduce(np.multiply(x, x, out=x)))
    return total


_EMPTY = Distribution(
    count=0, mean=None, std=None, min=None, p50=None, p90=None, p95=None, p99=None, p999=None, max=None
)

# Squares of deviations are summed a block at a time, in one reused buffer: numpy's std holds a
# temporary as large as its input (a point's ITL gaps: 8 bytes a chunk more). Up to one block it
# is numpy's std exactly.
_STD_BLOCK = 1 << 18


def _sample_std(arr: np.ndarray) -> float:
    """``arr.std(ddof=1)`` without a temporary the size of ``arr``: numpy's own arithmetic
    (pairwise sums) within each block of ``_STD_BLOCK`` values, the blocks' sums added in order."""
    if arr.size <= _STD_BLOCK:
        return float(arr.std(ddof=1))
    mean = np.add.reduce(arr, keepdims=True) / arr.size  # as numpy's _var computes it
    buffer = np.empty(_STD_BLOCK)
    squares = 0.0
    for i in range(0, arr.size, _STD_BLOCK):
        block = arr[i : i + _STD_BLOCK]
        x = buffer[: block.size]
        np.subtract(block, mean, out=x)
        squares += float(np.add.reduce(np.multiply(x, x, out=x)))
    return float(np.sqrt(squares / (arr.size - 1)))
