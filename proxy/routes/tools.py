"""Tool routes: invoke a tool (the native envelope) and list the catalog."""

from __future__ import annotations

import orjson
from aiohttp import web

from proxy.appkeys import CATALOG, PDP, PIPELINE, identity_of
from proxy.body import read_model
from proxy.envelope import InvokeRequest
from proxy.errors import PdpUnavailable

routes = web.RouteTableDef()


def json_response(status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


@routes.post("/v1/tools/invoke")
async def invoke(request: web.Request) -> web.Response:
    identity = identity_of(request)
    envelope = await read_model(request, InvokeRequest)
    outcome = await request.app[PIPELINE].invoke(identity, envelope)
    return json_response(outcome.http_status, outcome.body, outcome.headers)


@routes.get("/v1/tools")
async def list_tools(request: web.Request) -> web.Response:
    """The catalog filtered by the list-phase policy: a tool the caller may not call is absent."""
    identity = identity_of(request)
    catalog = request.app[CATALOG]
    pdp = request.app[PDP]
    pipeline = request.app[PIPELINE]
    if not pdp.ready:
        raise PdpUnavailable("the policy decision point is not ready")
    tools = []
    for m in catalog.manifests():
        decision, _, _ = await pdp.decide(
            decision_id="",
            agent_id=identity.agent_id,
            team_id=identity.team_id,
            roles=identity.roles,
            tool=pipeline.tool_view(m),
            args=None,
            context={"team_id": identity.team_id},
            phase="list",
        )
        if decision.error_code is not None:
            raise PdpUnavailable("the policy decision point could not decide")
        if decision.allow:
            tools.append(m.entry(available=catalog.available(m.tool_id)))
    return json_response(200, {"tools": tools})



