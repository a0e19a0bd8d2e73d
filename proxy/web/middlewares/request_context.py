"""Request context: a request id bound into every log line of the request, echoed back."""

from __future__ import annotations


from aiohttp import web
from aiohttp.typedefs import Handler

from wire.ids import ID_RE
from infra.ids import new_hex
from infra import log_context

HEADER = "X-Request-Id"


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    given = request.headers.get(HEADER, "")
    request_id = given if ID_RE.fullmatch(given) else new_hex()
    log_context.start(request_id=request_id)  # the request's task: a context of its own
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers[HEADER] = request_id
        raise
    response.headers[HEADER] = request_id
    return response
