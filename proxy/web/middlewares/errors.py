"""One writer for every error: typed errors and aiohttp's own become the same JSON body."""

from __future__ import annotations

import orjson
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from infra.db import note_failure, unavailable
from proxy.web.keys import METRICS, POOL
from proxy.errors import ApiError, DependencyUnavailable

log = structlog.get_logger("toolproxy.http")

_HTTP_CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def render(exc: ApiError) -> web.Response:
    return web.Response(
        status=exc.http_status,
        body=orjson.dumps(exc.body()),
        content_type="application/json",
        headers=exc.headers,
    )


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    try:
        return await handler(request)
    except ApiError as exc:
        metrics.errors.labels(reason=exc.code).inc()
        return render(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        metrics.errors.labels(reason=code).inc()
        body = {"ok": False, "error": {"code": code, "message": exc.reason}}
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "x-request-id")}
        return web.Response(
            status=exc.status, body=orjson.dumps(body), content_type="application/json",
            headers=headers,
        )
    except Exception as exc:
        if unavailable(exc):
            # Postgres away, stalled or not the primary (a failover under way): retrying works.
            pool = request.app.get(POOL)
            if pool is not None:
                await note_failure(pool, exc)
            log.warning("dependency_unavailable", path=request.path, error=str(exc)[:200] or type(exc).__name__)
            error = DependencyUnavailable("a dependency (the database) is unavailable; retry shortly",
                                          headers={"Retry-After": "1"})
            metrics.errors.labels(reason=error.code).inc()
            return render(error)
        metrics.errors.labels(reason="internal_error").inc()
        log.exception("unhandled_error", path=request.path)
        body = {"ok": False, "error": {"code": "internal_error", "message": "internal error"}}
        return web.Response(status=500, body=orjson.dumps(body), content_type="application/json")
