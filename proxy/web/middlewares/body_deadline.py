"""Body read timeout: a request whose body has not arrived whole within the bound after its
head loses its connection (slow uploads hold no connection and no handler for long)."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.keys import SETTINGS

log = structlog.get_logger("toolproxy.http")


@web.middleware
async def body_deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.body_exists or request.content.is_eof():  # no body, or it came with the head
        return await handler(request)

    def expire() -> None:
        if not request.content.is_eof() and request.transport is not None:
            log.info("body_timeout", path=request.path)
            request.transport.close()

    timer = asyncio.get_running_loop().call_later(
        request.app[SETTINGS].http_body_timeout_s, expire)
    try:
        return await handler(request)
    finally:
        timer.cancel()
