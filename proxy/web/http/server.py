"""Serving the app: a TCP site that caps its connections, the read timeouts, /metrics on a
port of its own, and the drain on SIGTERM.

aiohttp's keep-alive timer (armed when a connection opens and after each response) closes a
connection whose next request head has not arrived in time, idle or trickling; the body
timeout is the body_deadline middleware's; the cap is this site's. Connections past the cap
are answered 503 and closed before anything is read from them.

On SIGTERM (or SIGINT) a replica drains: /readyz answers 503 at once and every response closes
its connection, calls keep being served for TOOLPROXY_DRAIN_DELAY_S (while load balancers take
the replica out), then the listening socket closes, idle connections are closed, the calls in
flight have TOOLPROXY_DRAIN_TIMEOUT_S to finish (cancelled past it: each is then recorded
CANCELLED), and the app's parts close (the journal's records are durable before any answer).
"""

from __future__ import annotations

import asyncio
import signal
import time

import orjson
import structlog
from aiohttp import web, web_response

from proxy.config import Settings
from proxy.web.http.headers import SERVER
from proxy.web.keys import DRAINING, METRICS

log = structlog.get_logger("toolproxy.server")

_BUSY_BODY = orjson.dumps({"ok": False, "error": {
    "code": "too_many_connections", "message": "this worker serves its maximum of connections"}})
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
         b"Content-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\nConnection: close\r\n"
         b"Retry-After: 1\r\nServer: " + SERVER.encode() + b"\r\n\r\n" + _BUSY_BODY)


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY)
        transport.close()


class CappedTCPSite(web.BaseSite):
    """A TCP site serving at most `max_connections` connections at once."""

    __slots__ = ("_host", "_port", "_max", "_reuse_port", "_bound_port")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, max_connections: int,
                 reuse_port: bool = False, backlog: int = 128) -> None:
        super().__init__(runner, backlog=backlog)
        self._host, self._port, self._max = host, port, max_connections
        self._reuse_port = reuse_port
        self._bound_port = port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._bound_port}"

    @property
    def port(self) -> int:
        return self._bound_port

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None

        def protocol() -> asyncio.Protocol:
            if len(server.connections) >= self._max:
                return _Refused()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(protocol, self._host or None, self._port,
                                                backlog=self._backlog,
                                                reuse_port=self._reuse_port or None)
        if self._server.sockets:
            self._bound_port = self._server.sockets[0].getsockname()[1]


def make_runner(app: web.Application, settings: Settings) -> web.AppRunner:
    return web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=settings.drain_timeout_s,  # the calls in flight, once draining
        handler_cancellation=True,  # a client that disconnects cancels its call
        keepalive_timeout=settings.http_header_timeout_s,
        # After a response, the unread rest of a body is drained this long at most.
        lingering_time=min(10.0, settings.http_body_timeout_s),
    )


async def _close_while_draining(request: web.Request, response: web.StreamResponse) -> None:
    """While draining, no connection is kept alive: a load balancer's pooled connection to
    this replica ends with its response, rather than being cut idle at the stop."""
    if request.app[DRAINING].is_set():
        response.force_close()
        if request.version >= (1, 1):  # the header is already prepared (aiohttp 3.10+): say it
            response.headers["Connection"] = "close"


async def start(app: web.Application, settings: Settings) -> tuple[web.AppRunner, CappedTCPSite]:
    # aiohttp answers malformed requests itself, outside the app's response signal: the Server
    # header it writes then must not name aiohttp and Python either (a process-wide default).
    web_response.SERVER_SOFTWARE = SERVER  # type: ignore[attr-defined]
    app.on_response_prepare.append(_close_while_draining)
    runner = make_runner(app, settings)
    await runner.setup()
    site = CappedTCPSite(runner, settings.host, settings.port,
                         max_connections=settings.http_max_connections,
                         reuse_port=settings.reuse_port)
    await site.start()
    return runner, site


async def start_metrics(app: web.Application, settings: Settings) -> web.AppRunner:
    """/metrics and /healthz on TOOLPROXY_METRICS_PORT (the workers share it, as the API port)."""
    assert settings.metrics_port is not None
    metrics = app[METRICS]

    async def scrape(request: web.Request) -> web.Response:
        body, content_type = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "checks": {"event_loop": True}})

    side = web.Application()
    side.router.add_get("/metrics", scrape)
    side.router.add_get("/healthz", healthz)
    runner = web.AppRunner(side, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.metrics_port,
                      reuse_port=settings.reuse_port or None).start()
    return runner


async def drain(app: web.Application, settings: Settings) -> None:
    """The first half of a stop: not ready, connections not kept, still serving meanwhile."""
    app[DRAINING].set()
    log.info("draining", delay_s=settings.drain_delay_s, timeout_s=settings.drain_timeout_s)
    await asyncio.sleep(settings.drain_delay_s)


async def serve_until_stopped(app: web.Application, settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain (module docstring) and stop."""
    runner, _ = await start(app, settings)
    side = await start_metrics(app, settings) if settings.metrics_port is not None else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        await drain(app, settings)
    finally:
        began = time.monotonic()
        await runner.cleanup()
        log.info("stopped", drained_s=round(time.monotonic() - began, 3))
        if side is not None:
            await side.cleanup()
