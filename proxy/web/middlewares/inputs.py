"""Refuse a NUL anywhere in the request target (path or query): 400 before any route runs."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.errors import InvalidRequest
from proxy.core.input_rules import NUL_MESSAGE


@web.middleware
async def refuse_nul(request: web.Request, handler: Handler) -> web.StreamResponse:
    # raw_path is the target as sent (path and query, still percent-encoded): one search.
    target = request.raw_path
    if "%00" in target or "\x00" in target:
        raise InvalidRequest(NUL_MESSAGE)
    return await handler(request)
