"""The run directory's layout: every file a run, a capacity search or an experiment writes there,
named once. Old run directories depend on these names (CHANGELOG.md, "Run-directory layout"):
a name changes only with a migration that ``tokenbench recompute`` reads both ways.

A run directory holds ``CONFIG`` (the settings and what the run found, written first), ``RECORDS``
(one line a request, appended and flushed as they finish), ``SAMPLES`` (the server's metrics and
the points' start and end events), ``SPANS`` (with --server-traces), ``SERVER_LOG`` (a launched
server's output) and ``RESULTS`` (rewritten after every point; derived from the others, so
``tokenbench recompute`` makes it again). A capacity search adds ``CAPACITY``; an experiment
directory holds ``EXPERIMENT`` and one run directory a cell. ``AGREEMENT``: paired outputs, in the
first run directory `tokenbench agree` read, and in a determinism study's experiment directory."""

from __future__ import annotations

CONFIG = "config.json"
RECORDS = "records.jsonl"
SAMPLES = "samples.jsonl"
SPANS = "server_spans.jsonl"
SERVER_LOG = "server.log"
RESULTS = "results.json"
CAPACITY = "capacity.json"
EXPERIMENT = "experiment.json"
AGREEMENT = "agreement.json"  # paired outputs (`tokenbench agree`, the determinism study)
