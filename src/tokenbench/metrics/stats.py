"""Distributions: count, mean, sample std, percentiles (numpy), as results.json writes them."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..results import Distribution

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
