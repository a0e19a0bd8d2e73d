"""Headers on every response the app prepares: no MIME sniffing, no caching of API answers,
and a Server header that names no software version."""

from __future__ import annotations

from aiohttp import web

SERVER = "toolproxy"


async def harden_response(request: web.Request, response: web.StreamResponse) -> None:
    """An `on_response_prepare` signal handler (it sees every response, streams included)."""
    headers = response.headers
    headers["X-Content-Type-Options"] = "nosniff"
    headers.setdefault("Cache-Control", "no-store")  # a stream keeps its own (no-cache)
    headers["Server"] = SERVER
