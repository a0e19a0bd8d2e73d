"""Turn routes: start a turn, read it (steps and result), resume it after the human decision,
cancel it. Team-scoped: another team's turn does not exist for the caller."""

from __future__ import annotations

from aiohttp import web

from proxy.web.api.keys import TURNS
from proxy.web.keys import identity_of
from proxy.web.body import read_model
from proxy.web.responses import json_response
from proxy.turns.models import StartTurn

routes = web.RouteTableDef()


@routes.post("/v1/turns")
async def start_turn(request: web.Request) -> web.Response:
    """201 once the turn rests (held, finished) or 202 while it still runs (after
    TOOLPROXY_TURN_WAIT_S): {turn_id, run_id, status, ...}."""
    identity = identity_of(request)
    body = await read_model(request, StartTurn)
    status, view = await request.app[TURNS].start(identity, body)
    return json_response(status, view)


@routes.get("/v1/turns/{turn_id}")
async def get_turn(request: web.Request) -> web.Response:
    view = await request.app[TURNS].view(identity_of(request), request.match_info["turn_id"])
    return json_response(200, view)


@routes.post("/v1/turns/{turn_id}/resume")
async def resume_turn(request: web.Request) -> web.Response:
    """200 once the resumed turn rests; 202 while its held calls are still pending."""
    status, view = await request.app[TURNS].resume(identity_of(request), request.match_info["turn_id"])
    return json_response(status, view)


@routes.post("/v1/turns/{turn_id}/cancel")
async def cancel_turn(request: web.Request) -> web.Response:
    status, view = await request.app[TURNS].cancel(identity_of(request), request.match_info["turn_id"])
    return json_response(status, view)
