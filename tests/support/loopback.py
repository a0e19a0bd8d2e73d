"""A small aiohttp app served on loopback for a test (a fake upstream, a local site)."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, port: int = 0) -> tuple[web.AppRunner, int]:
    """Starts `app` on 127.0.0.1 (`port` 0: a free one); returns its runner and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
