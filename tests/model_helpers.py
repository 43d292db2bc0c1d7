"""Points the simulated engine itself made, read back as a fit reads a run: known answers for the
server model's tests."""

from __future__ import annotations

import math

import numpy as np

from tokenbench.model.engine import Cluster, Seq
from tokenbench.model.observe import PointObs
from tokenbench.model.params import ServerModel


def run_seqs(model: ServerModel, seqs: list[Seq]) -> None:
    """Every request through one replica of ``model`` until the last token."""
    cluster = Cluster(model)
    for s in seqs:
        cluster.submit(s)
    cluster.run(lambda seq, t: None)


def engine_point(
    model: ServerModel, seqs: list[Seq], index: int = 0, label: str = "x", jitter_s: float = 2e-4, cached: bool = False
) -> PointObs:
    """``seqs`` (in send order) through ``model``, each request's tokens read ``jitter_s`` (normal,
    seeded by ``index``) off; ``cached``: the server says the prompt tokens it reused."""
    run_seqs(model, seqs)
    rng = np.random.default_rng(index)
    jitter = rng.normal(0, jitter_s, len(seqs))
    first = np.array([s.token_times[0] for s in seqs]) + jitter
    last = np.array([s.token_times[-1] for s in seqs]) + jitter
    n = len(seqs)
    chunks = np.array([float(len(s.token_times)) for s in seqs])
    return PointObs(
        run="r",
        index=index,
        label=label,
        sent=np.array([s.arrival_s for s in seqs]),
        first=first,
        last=last,
        chunks=chunks,
        prompt=np.array([float(s.prompt_tokens) for s in seqs]),
        output=chunks,
        kv_scrapes=[],
        prompt_extra=np.full(n, math.nan),
        cached=np.array([float(s.cached_tokens) for s in seqs]) if cached else None,
    )
