"""OTLP trace exports (OTLP/HTTP: protobuf or JSON) -> flat spans, one JSON object each.

A span as server_spans.jsonl keeps it: ``trace_id`` and ``span_id`` (hex), ``name``,
``start_unix_ns`` and ``end_unix_ns`` (the server's wall clock), ``attributes`` (name -> scalar;
a list or map attribute as JSON), ``service`` (the resource's service.name), ``instance`` (its
service.instance.id: a fleet's replica, None without one) and ``received_s``
(when the receiver got it, on the run's clock: late spans are told by it).
"""

from __future__ import annotations

import json
from typing import Any

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class OtlpError(ValueError):
    """A body that is not an OTLP trace export of the content type it names."""


# Any: an OTLP attribute's value (string, int, float, bool, or a list/map rendered as JSON)
def _any_value(value: Any) -> Any:
    """OTLP JSON's AnyValue -> a scalar (intValue arrives as a string in OTLP JSON)."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind in ("stringValue", "boolValue"):
        return inner
    return json.dumps(inner, sort_keys=True)


def _from_json(body: bytes) -> list[dict[str, Any]]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise OtlpError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OtlpError("not an ExportTraceServiceRequest object")
    spans = []
    for rs in data.get("resourceSpans") or []:
        resource = {a.get("key"): _any_value(a.get("value")) for a in (rs.get("resource") or {}).get("attributes", [])}
        for ss in rs.get("scopeSpans") or []:
            for s in ss.get("spans") or []:
                spans.append(
                    {
                        "trace_id": str(s.get("traceId", "")).lower(),
                        "span_id": str(s.get("spanId", "")).lower(),
                        "name": s.get("name"),
                        "start_unix_ns": int(s.get("startTimeUnixNano") or 0),
                        "end_unix_ns": int(s.get("endTimeUnixNano") or 0),
                        "attributes": {a.get("key"): _any_value(a.get("value")) for a in s.get("attributes") or []},
                        "service": resource.get("service.name"),
                        "instance": resource.get("service.instance.id"),  # a fleet's replica
                    }
                )
    return spans


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]  # no stubs installed (types-protobuf)

    return json.dumps(MessageToDict(getattr(value, kind)), sort_keys=True)


def _from_protobuf(body: bytes) -> list[dict[str, Any]]:
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]  # no stubs installed (types-protobuf)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpError(f"not an OTLP protobuf export: {exc}") from exc
    spans = []
    for rs in request.resource_spans:
        resource = {a.key: _pb_value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "name": s.name,
                        "start_unix_ns": s.start_time_unix_nano,
                        "end_unix_ns": s.end_time_unix_nano,
                        "attributes": {a.key: _pb_value(a.value) for a in s.attributes},
                        "service": resource.get("service.name"),
                        "instance": resource.get("service.instance.id"),  # a fleet's replica
                    }
                )
    return spans


def decode(body: bytes, content_type: str) -> list[dict[str, Any]]:
    """The spans of one export; OtlpError for a body that is not one."""
    if content_type == PROTOBUF:
        return _from_protobuf(body)
    if content_type == JSON:
        return _from_json(body)
    raise OtlpError(f"content type {content_type!r}: OTLP/HTTP is {PROTOBUF} or {JSON}")


def encode_protobuf(spans: list[dict[str, Any]], service: str, instance: str | None = None) -> bytes:
    """Spans as an OTLP/HTTP protobuf export (the mock's exporter; the inverse of ``decode``);
    ``instance``: the resource's service.instance.id (a fleet's replica)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    if instance is not None:
        kv = rs.resource.attributes.add()
        kv.key, kv.value.string_value = "service.instance.id", instance
    ss = rs.scope_spans.add()
    for span in spans:
        s = ss.spans.add()
        s.trace_id, s.span_id = bytes.fromhex(span["trace_id"]), bytes.fromhex(span["span_id"])
        s.name, s.kind = span["name"], 2  # SPAN_KIND_SERVER
        s.start_time_unix_nano, s.end_time_unix_nano = span["start_unix_ns"], span["end_unix_ns"]
        for key, value in span["attributes"].items():
            a = s.attributes.add()
            a.key = key
            if isinstance(value, bool):
                a.value.bool_value = value
            elif isinstance(value, int):
                a.value.int_value = value
            elif isinstance(value, float):
                a.value.double_value = value
            else:
                a.value.string_value = str(value)
    return bytes(request.SerializeToString())
