"""OpenTelemetry spans for the stages of a call (authenticate, validate, decide, admit,
forward, record, respond), exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; otherwise `span()` is a shared no-op costing a
fraction of a microsecond. The standard OTEL_* variables configure the exporter."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

_NOOP = contextlib.nullcontext()
_tracer: Any = None
_provider: Any = None

STAGES = ("authenticate", "validate", "decide", "admit", "forward", "record", "respond")


def enabled() -> bool:
    return _tracer is not None


def configured() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(service_name: str = "toolproxy") -> bool:
    """Once per process; True when spans are exported."""
    global _tracer, _provider
    if _tracer is not None or not configured():
        return _tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    _provider = TracerProvider(resource=Resource.create({
        "service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)}))
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _tracer = _provider.get_tracer("toolproxy")
    return True


def shutdown() -> None:
    """Flush what is buffered (on stop)."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def span(name: str, **attributes: Any) -> Any:
    """A child span of the current one (a context manager), or a no-op."""
    if _tracer is None:
        return _NOOP
    return _tracer.start_as_current_span(name, attributes=attributes or None)


@contextlib.contextmanager
def server_span(name: str, **attributes: Any) -> Iterator[Any]:
    """The request's root span; yields it (or None) so attributes can be added later."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(name, kind=SpanKind.SERVER, attributes=attributes) as s:
        yield s


# The W3C trace context keys an MCP client may put in a request's params._meta.
TRACE_META_KEYS = ("traceparent", "tracestate", "baggage")


@contextlib.contextmanager
def joined(carrier: dict[str, Any] | None, name: str, **attributes: Any) -> Iterator[Any]:
    """A span that continues the caller's trace when `carrier` (an MCP request's `_meta`)
    holds a W3C `traceparent`, so the stages of the call nest under the client's span; a
    plain child of the current span otherwise, and a no-op when not tracing. A malformed
    traceparent is ignored (the propagator validates it)."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    fields = {k: v for k, v in (carrier or {}).items()
              if k in TRACE_META_KEYS and isinstance(v, str) and len(v) <= 512}
    if "traceparent" not in fields:
        with _tracer.start_as_current_span(name, attributes=attributes or None) as s:
            yield s
        return
    from opentelemetry import trace

    here = trace.get_current_span().get_span_context()  # the HTTP request's own span
    links = [trace.Link(here)] if here.is_valid else None
    parent = TraceContextTextMapPropagator().extract(carrier=fields)
    with _tracer.start_as_current_span(name, context=parent, kind=SpanKind.SERVER, links=links,
                                       attributes=attributes or None) as s:
        yield s


def annotate(**attributes: Any) -> None:
    """Attributes on the current span (call_id, decision_id, tool...), when tracing."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    for k, v in attributes.items():
        if v is not None:
            current.set_attribute(f"toolproxy.{k}", v)
