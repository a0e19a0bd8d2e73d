"""Tool routes: invoke a tool (the native envelope) and list the catalog."""

from __future__ import annotations

import orjson
from aiohttp import web

from proxy import tracing
from proxy.appkeys import CATALOG, PIPELINE, identity_of
from proxy.body import read_model
from proxy.envelope import InvokeRequest

routes = web.RouteTableDef()


def json_response(status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


@routes.post("/v1/tools/invoke")
async def invoke(request: web.Request) -> web.Response:
    identity = identity_of(request)
    envelope = await read_model(request, InvokeRequest)
    body_bytes = len(await request.read())  # read already: the size bounds the args' size
    outcome = await request.app[PIPELINE].invoke(identity, envelope, body_bytes)
    with tracing.span("respond"):
        return json_response(outcome.http_status, outcome.body, outcome.headers)


@routes.get("/v1/tools")
async def list_tools(request: web.Request) -> web.Response:
    """The catalog filtered by the list-phase policy: a tool the caller may not call is absent."""
    identity = identity_of(request)
    catalog = request.app[CATALOG]
    manifests = await request.app[PIPELINE].callable_tools(identity)
    return json_response(200, {"tools": [m.entry(available=catalog.available(m.tool_id)) for m in manifests]})
