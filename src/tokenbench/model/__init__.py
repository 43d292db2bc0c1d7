"""What if: a model of one server configuration, calibrated from runs already made,
that predicts loads nobody ran.

params.py (the fitted model as JSON: each parameter's value, uncertainty and which runs constrained
it), observe.py (runs on disk -> per-request facts: arrival, tokens, first and last token, batch
around it), fit.py (those facts -> a ServerModel), engine.py (the server: step-synchronous FCFS
continuous batching with a slot limit, a KV budget with preemption, a chunked-prefill budget; N
replicas behind a router), drive.py (tokenbench's own load definitions -> arrivals in virtual
time, records of the project's type), predict.py (a RunConfig -> a run directory whose
results.json derive wrote, marked ``predicted``), validate.py (a prediction against a real run).
"""
