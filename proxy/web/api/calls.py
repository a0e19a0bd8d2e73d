"""Calls as objects: read one, cancel one, fetch an artifact of one (team-scoped: another
team's call does not exist for the caller)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from proxy.web.keys import APPROVAL_FLOW, JOURNAL, PIPELINE, POOL, identity_of
from proxy.records.reads import read_call_now, read_result_now
from proxy.records.calls import TERMINAL, read_call
from proxy.errors import Forbidden, NotFound
from proxy.web.api.errors import CallNotRunning
from proxy.core.output import read_artifact
from proxy.web.params import path_uuid
from proxy.web.responses import json_response

routes = web.RouteTableDef()

CANCEL_WAIT_S = 3.0


@routes.get("/v1/calls/{call_id}")
async def get_call(request: web.Request) -> web.Response:
    """The call's latest state, at once after its response, from any replica."""
    identity = identity_of(request)
    call_id = path_uuid(request, "call_id", "no such call")
    call = await read_call_now(request.app[POOL], request.app[JOURNAL], call_id, identity.team_id)
    if call is None:
        raise NotFound("no such call")
    return json_response(200, call)


@routes.get("/v1/results/{result_id}")
async def get_result(request: web.Request) -> web.Response:
    """A call's result (output, metering, references) by its result_id."""
    identity = identity_of(request)
    result_id = path_uuid(request, "result_id", "no such result")
    result = await read_result_now(request.app[POOL], request.app[JOURNAL], result_id, identity.team_id)
    if result is None:
        raise NotFound("no such result")
    return json_response(200, result)


@routes.post("/v1/calls/{call_id}/cancel")
async def cancel_call(request: web.Request) -> web.Response:
    """A running call is stopped by the replica running it (told over NATS), its service is
    told to stop, and it ends CANCELLED; a call awaiting approval ends CANCELLED at once.
    Only the calling agent (or the team's governance) may cancel; each call ends once."""
    identity = identity_of(request)
    pool = request.app[POOL]
    pipeline = request.app[PIPELINE]
    call_id = path_uuid(request, "call_id", "no such call")
    by = f"{identity.role}:{identity.agent_id}"
    call = await read_call(pool, call_id, identity.team_id)
    if call is None:
        # Possibly running but not yet on record: ask, then look again.
        await pipeline.inflight.request_cancel(call_id, identity.team_id, by)
        await asyncio.sleep(0.2)
        call = await read_call(pool, call_id, identity.team_id)
        if call is None:
            raise NotFound("no such call")
    if call["agent_id"] != identity.agent_id and not identity.is_governance:
        raise Forbidden("only the calling agent or the team's governance may cancel a call")
    if call["status"] in TERMINAL:
        raise CallNotRunning(f"the call already ended {call['status']}")
    if call["status"] == "AUTHORIZATION_REQUIRED":
        if not await request.app[APPROVAL_FLOW].cancel_held(call_id, by):
            call = await read_call(pool, call_id, identity.team_id)
            if call is not None and call["status"] in TERMINAL:
                raise CallNotRunning(f"the call already ended {call['status']}")
            # approved and being resumed right now: stop that execution instead
            await pipeline.inflight.request_cancel(call_id, identity.team_id, by)
    else:
        await pipeline.inflight.request_cancel(call_id, identity.team_id, by)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT_S
    while loop.time() < deadline:
        call = await read_call(pool, call_id, identity.team_id)
        if call is not None and call["status"] in TERMINAL:
            return json_response(200, call)
        await asyncio.sleep(0.05)
    return json_response(202, {"call_id": call_id, "status": "CANCELLING"})


@routes.get("/v1/artifacts/{artifact_id}")
async def get_artifact(request: web.Request) -> web.Response:
    identity = identity_of(request)
    artifact_id = path_uuid(request, "artifact_id", "no such artifact")
    row = await read_artifact(request.app[POOL], artifact_id, identity.team_id)
    if row is None:
        raise NotFound("no such artifact")
    # What a tool (or an agent, through file.write) produced is never rendered as a page on
    # this origin — the console lives here: a download, sandboxed, never sniffed.
    return web.Response(body=row["content"], content_type=row["media_type"], headers={
        "Digest": f"sha-256={row['sha256']}",
        "Content-Disposition": f'attachment; filename="{artifact_id}"',
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "X-Content-Type-Options": "nosniff"})
