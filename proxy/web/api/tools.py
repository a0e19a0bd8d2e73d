"""Tool routes: invoke a tool (the native envelope) and list the catalog."""

from __future__ import annotations

from aiohttp import web

from infra import tracing
from proxy.core.envelope import InvokeRequest
from proxy.web.body import read_model
from proxy.web.keys import CATALOG, PIPELINE, identity_of
from proxy.web.native import respond
from proxy.web.responses import json_response

routes = web.RouteTableDef()


@routes.post("/v1/tools/invoke")
async def invoke(request: web.Request) -> web.Response:
    identity = identity_of(request)
    envelope = await read_model(request, InvokeRequest)
    body_bytes = len(await request.read())  # read already: the size bounds the args' size
    outcome = await request.app[PIPELINE].invoke(identity, envelope, body_bytes)
    with tracing.span("respond"):
        return respond(outcome)


@routes.get("/v1/tools")
async def list_tools(request: web.Request) -> web.Response:
    """The catalog filtered by the list-phase policy: a tool the caller may not call is absent."""
    identity = identity_of(request)
    catalog = request.app[CATALOG]
    manifests = await request.app[PIPELINE].callable_tools(identity)
    return json_response(200, {"tools": [m.entry(available=catalog.available(m.tool_id)) for m in manifests]})
