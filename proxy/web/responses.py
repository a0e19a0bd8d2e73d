"""JSON responses, written the one way every surface writes them (orjson)."""

from __future__ import annotations

import orjson
from aiohttp import web


def json_response(status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )
