"""server spans: server spans joined to the client's records.

keys.py (the join key each request carries: W3C traceparent and X-Request-Id), otlp.py (OTLP
JSON/protobuf -> flat spans), receiver.py (the OTLP/HTTP and OTLP/gRPC receiver writing
server_spans.jsonl), shapes.py (each engine's span shape -> a request's phases, pure), phases.py
(spans joined to records: per-request server phases on the run's clock, pure), launch.py (a
launched engine pointed at the receiver).
"""
