"""issue 24: server spans joined to the client's records.

keys.py (the join key each request carries: W3C traceparent and X-Request-Id), otlp.py (OTLP
JSON/protobuf -> flat spans), receiver.py (the OTLP/HTTP receiver writing server_spans.jsonl),
phases.py (spans joined to records: per-request server phases on the run's clock, pure).
"""
