"""A local OTLP/HTTP trace receiver (the collector's protocol: protobuf
ExportTraceServiceRequest on POST /v1/traces), keeping the spans it was sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from infra.embedded.ports import free_port
from tests.support.loopback import serve


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    seconds: float
    attributes: dict[str, object]


@dataclass
class OtlpReceiver:
    port: int = field(default_factory=free_port)
    spans: list[Span] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _traces(self, request: web.Request) -> web.Response:
        req = ExportTraceServiceRequest()
        req.ParseFromString(await request.read())
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {a.key: (a.value.string_value or a.value.int_value or a.value.bool_value)
                             for a in s.attributes}
                    self.spans.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(),
                                           s.parent_span_id.hex(),
                                           (s.end_time_unix_nano - s.start_time_unix_nano) / 1e9, attrs))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    async def start(self) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/traces", self._traces)
        self._runner, _ = await serve(app, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
