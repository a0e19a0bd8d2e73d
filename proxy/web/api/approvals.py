"""Approvals: governance lists and decides pending calls; agents resume their approved calls."""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web
from pydantic import Field

from pdp.data.approvals import ApprovalError
from proxy.web.keys import APPROVAL_FLOW, identity_of
from proxy.web.body import read_model
from proxy.errors import Forbidden, NotFound
from proxy.web.api.errors import ApprovalNotPending
from proxy.web.native import respond
from proxy.web.params import path_uuid, query_choice, query_id, query_int
from proxy.web.responses import json_response
from proxy.core.input_rules import StrictModel

routes = web.RouteTableDef()

STATES = ("pending", "approved", "denied", "expired", "executing", "executed")


class DecisionBody(StrictModel):
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=1000)


class ResumeBody(StrictModel):
    args: dict[str, Any] | None = None  # only for confidential calls (their args were not kept)


@routes.get("/v1/approvals")
async def list_approvals(request: web.Request) -> web.Response:
    identity = identity_of(request)
    if not identity.is_governance:
        raise Forbidden("approvals are for governance and admin tokens")
    state = query_choice(request.query, "state", (*STATES, "all"), "pending")
    team = query_id(request.query, "team_id")
    if not identity.is_admin:
        if team is not None and team != identity.team_id:
            raise Forbidden("governance tokens see their own team only")
        team = identity.team_id
    limit = query_int(request.query, "limit", 100, lo=1, hi=1000)
    flow = request.app[APPROVAL_FLOW]
    await flow.sweep()
    rows = await flow.approvals.list(team_id=team, state=None if state == "all" else state, limit=limit)
    return json_response(200, {"approvals": [a.as_json() for a in rows]})


@routes.post("/v1/approvals/{approval_id}/decision")
async def decide(request: web.Request) -> web.Response:
    identity = identity_of(request)
    if not identity.is_governance:
        raise Forbidden("only governance and admin tokens can approve or deny")
    body = await read_model(request, DecisionBody)
    flow = request.app[APPROVAL_FLOW]
    approval_id = path_uuid(request, "approval_id", "no such approval")
    try:
        current = await flow.approvals.get(approval_id)
    except ApprovalError:
        current = None
    # Another team's approval does not exist for this caller (admins see every team).
    if current is None or (current.team_id != identity.team_id and not identity.is_admin):
        raise NotFound("no such approval")
    if current.agent_id == identity.agent_id and current.team_id == identity.team_id:
        raise Forbidden("no self-authorization: you cannot decide on your own call")
    try:
        approval = await flow.decide(
            approval_id,
            approve=body.decision == "approve",
            by=identity.actor,
            reason=body.reason,
        )
    except ApprovalError as exc:
        if exc.code == "not_found":
            raise NotFound(exc.message) from None
        raise ApprovalNotPending(exc.message) from None
    return json_response(200, {"approval": approval.as_json()})


@routes.post("/v1/calls/{call_id}/resume")
async def resume(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, ResumeBody) if request.body_exists else ResumeBody()
    call_id = path_uuid(request, "call_id", "no such call")
    outcome = await request.app[APPROVAL_FLOW].resume(identity, call_id, body.args)
    return respond(outcome)
