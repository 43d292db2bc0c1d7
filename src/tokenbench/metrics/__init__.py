"""Records -> metrics. Pure functions: no clock, no I/O, no printing. Formulas: METRICS.md.

Every rate and distribution names its population and its period (``POPULATIONS``, also written
into each point of results.json):

- The window: from the end of ramp-up + warm-up to the end of the load (the deadline).
- Closed loop (users): distributions over the requests sent in the window. Rates over the
  window: output tokens that arrived in it, and requests counted by the share of their life
  (sent to end) inside it, so a steady point with U users at E2E L gives U/L, however the
  window cuts their requests. Goodput counts the good ones the same way, so goodput <= requests/s.
- Open loop (rates): the population is the requests *scheduled* in the window, sent or not;
  distributions, rates and goodput are all over it. Its work (requests, tokens) is divided by
  the time the server took to serve it: the window, stretched by how much the population's
  latency grew from its first third to its last (0 when the server keeps up, so requests/s
  equals the offered rate at any point length of a few E2Es: neither the pipeline fill at the
  start nor the tail after the last arrival biases it); or, when most of its last third was
  still unserved as the point ended, up to the end of the point. A request never sent waited at least until the
  point ended: that lower bound is in the queue-delay distribution (``queue_s_censored`` counts
  them), never dropped.
- Latency distributions are over successful requests; requests the run stopped (cancelled,
  not_sent) are censored: left out of error_rate and good_fraction alike.
A request's output tokens are spread evenly over its content chunks to place them in time.

Per-chunk work is vectorized: a record's ``chunk_times_s`` (an ``array('d')``) is read as a numpy
array without a copy, a batch of records' chunks is concatenated once, and window counts are one
pass over the sorted window edges. Python loops run once per request or per window, never per
chunk. A point's chunk times are tallied a batch at a time (``ChunkTally``) and dropped, so a
point of any length is summarized without holding them all.

Modules: ``stats`` (distributions), ``span`` (windows, a record's life), ``chunks`` (what is read
from chunk times: ChunkTally), ``pertoken`` (per-token ITL and the fluidity index, from each chunk's
tokens), ``point`` (summarize_point), ``timeseries``, ``sessions`` (by turn). Import from here.
"""

from tokenbench.metrics.chunks import TALLY_BATCH_CHUNKS, ChunkTally, inter_chunk_gaps, output_tokens_in
from tokenbench.metrics.point import (
    MIN_THIRD,
    POPULATIONS,
    backlog_growth_s,
    concurrency,
    count_outcomes,
    meets_slo,
    prompt_tokens,
    summarize_point,
    token_counts,
)
from tokenbench.metrics.sessions import by_turn, session_expected_reuse
from tokenbench.metrics.span import PointSpan, Window, series_edges, started_s, tokens_per_chunk
from tokenbench.metrics.stats import P999_MIN_COUNT, PERCENTILES, distribution
from tokenbench.metrics.timeseries import timeseries
from tokenbench.results import Distribution

__all__ = [
    "MIN_THIRD",
    "P999_MIN_COUNT",
    "PERCENTILES",
    "POPULATIONS",
    "TALLY_BATCH_CHUNKS",
    "ChunkTally",
    "Distribution",
    "PointSpan",
    "Window",
    "backlog_growth_s",
    "by_turn",
    "concurrency",
    "count_outcomes",
    "distribution",
    "inter_chunk_gaps",
    "meets_slo",
    "output_tokens_in",
    "prompt_tokens",
    "series_edges",
    "session_expected_reuse",
    "started_s",
    "summarize_point",
    "timeseries",
    "token_counts",
    "tokens_per_chunk",
]
