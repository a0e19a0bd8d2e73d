"""Operations routes: liveness, readiness, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from proxy.appkeys import CATALOG, METRICS, NC, PDP, POOL
from proxy.routes.tools import json_response

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return json_response(200, {"ok": True})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Ready when Postgres answers, NATS is connected and a policy with grants is loaded."""
    checks: dict[str, bool] = {}
    try:
        async with asyncio.timeout(1.0):
            await request.app[POOL].fetchval("SELECT 1")
        checks["postgres"] = True
    except Exception:
        checks["postgres"] = False
    checks["nats"] = request.app[NC].is_connected
    checks["pdp"] = request.app[PDP].ready
    checks["catalog"] = bool(request.app[CATALOG].manifests())
    ok = all(checks.values())
    return json_response(200 if ok else 503, {"ok": ok, "checks": checks})


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    from proxy.openapi import openapi_document  # imports every route module: built on demand

    return json_response(200, openapi_document())


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
