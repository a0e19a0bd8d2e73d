"""Serving the app: a TCP site that caps its connections, and the read timeouts.

aiohttp's keep-alive timer (armed when a connection opens and after each response) closes a
connection whose next request head has not arrived in time, idle or trickling; the body
timeout is the body_deadline middleware's; the cap is this site's. Connections past the cap
are answered 503 and closed before anything is read from them.
"""

from __future__ import annotations

import asyncio
import signal

import orjson
from aiohttp import web, web_response

from proxy.config import Settings
from proxy.http.headers import SERVER

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
        shutdown_timeout=10,
        handler_cancellation=True,  # a client that disconnects cancels its call
        keepalive_timeout=settings.http_header_timeout_s,
        # After a response, the unread rest of a body is drained this long at most.
        lingering_time=min(10.0, settings.http_body_timeout_s),
    )


async def start(app: web.Application, settings: Settings) -> tuple[web.AppRunner, CappedTCPSite]:
    # aiohttp answers malformed requests itself, outside the app's response signal: the Server
    # header it writes then must not name aiohttp and Python either (a process-wide default).
    web_response.SERVER_SOFTWARE = SERVER  # type: ignore[attr-defined]
    runner = make_runner(app, settings)
    await runner.setup()
    site = CappedTCPSite(runner, settings.host, settings.port,
                         max_connections=settings.http_max_connections,
                         reuse_port=settings.reuse_port)
    await site.start()
    return runner, site


async def serve_until_stopped(app: web.Application, settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully (in-flight calls finish)."""
    runner, _ = await start(app, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
