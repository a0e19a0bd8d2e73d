"""Governance administration: overrides, the decision log and policy revisions."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from pdp.decision_log import query_decisions
from pdp.rego_tests import run_policy_tests
from pdp.policy_set import PolicySet
from pdp.policy_store import activate, revisions
from proxy.appkeys import CATALOG, OVERRIDE_REPO, PDP, POOL, SETTINGS, identity_of
from proxy.body import read_model
from proxy.errors import ApiError, Forbidden, InvalidRequest, NotFound, UnknownTool
from proxy.identity import ID_PATTERN, is_valid_id
from proxy.routes.admin_grants import governed_team, require_governance
from proxy.routes.tools import json_response
from services.sdk.manifest import is_valid_tool_name

routes = web.RouteTableDef()


class PolicyRejected(ApiError):
    code = "policy_invalid"
    http_status = 400


class OverrideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tool: str = Field(max_length=64)
    effect: Literal["allow", "deny"] = "allow"
    timeout_ms: int | None = Field(default=None, gt=0, le=60_000)
    rate_per_minute: int | None = Field(default=None, ge=0, le=1_000_000)
    reason: str = Field(default="", max_length=500)
    expires_at: datetime | None = None


class OverrideKey(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tool: str = Field(max_length=64)


class PolicyPush(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modules: dict[str, str] = Field(min_length=1, max_length=64)


@routes.post("/v1/admin/overrides")
async def put_override(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, OverrideRequest)
    require_governance(identity, body.team_id)
    if not is_valid_tool_name(body.tool) or request.app[CATALOG].get(body.tool) is None:
        raise UnknownTool(f"no tool named {body.tool!r}")
    if body.agent_id == identity.agent_id and body.effect == "allow":
        raise Forbidden("no self-authorization: you cannot allow tools for yourself")
    o = await request.app[OVERRIDE_REPO].put(
        team_id=body.team_id, agent_id=body.agent_id, tool=body.tool, effect=body.effect,
        timeout_ms=body.timeout_ms, rate_per_minute=body.rate_per_minute, reason=body.reason,
        created_by=f"{identity.role}:{identity.agent_id}@{identity.team_id}",
        expires_at=body.expires_at,
    )
    return json_response(201, {"override": o.as_json()})


@routes.get("/v1/admin/overrides")
async def list_overrides(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    rows = await request.app[OVERRIDE_REPO].list(team)
    return json_response(200, {"overrides": [o.as_json() for o in rows]})


@routes.post("/v1/admin/overrides/delete")
async def delete_override(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, OverrideKey)
    require_governance(identity, body.team_id)
    o = await request.app[OVERRIDE_REPO].delete(team_id=body.team_id, agent_id=body.agent_id, tool=body.tool)
    if o is None:
        raise NotFound("no such override")
    return json_response(200, {"override": o.as_json()})


@routes.get("/v1/admin/decisions")
async def decisions(request: web.Request) -> web.Response:
    q = request.query
    team = governed_team(request, identity_of(request))
    if q.get("agent_id") is not None and not is_valid_id(q["agent_id"]):
        raise InvalidRequest("agent_id is not a valid id")
    if q.get("tool") is not None and not is_valid_tool_name(q["tool"]):
        raise InvalidRequest("tool is not a valid tool name")
    if q.get("result") not in (None, "allow", "deny", "approval_required", "error"):
        raise InvalidRequest("result must be allow, deny, approval_required or error")
    if q.get("phase") not in (None, "list", "call"):
        raise InvalidRequest("phase must be list or call")
    try:
        since = datetime.fromisoformat(q["since"]) if "since" in q else None
        until = datetime.fromisoformat(q["until"]) if "until" in q else None
        limit = min(max(int(q.get("limit", "100")), 1), 1000)
        call_id = q.get("call_id")
        rows = await query_decisions(
            request.app[POOL], team_id=team, agent_id=q.get("agent_id"), tool=q.get("tool"),
            result=q.get("result"), phase=q.get("phase"), call_id=call_id, since=since,
            until=until, limit=limit,
        )
    except ValueError as exc:
        raise InvalidRequest(f"bad query: {exc}") from None
    return json_response(200, {"decisions": rows})


@routes.get("/v1/admin/policies")
async def list_policies(request: web.Request) -> web.Response:
    identity = identity_of(request)
    require_governance(identity, None)
    pdp = request.app[PDP]
    return json_response(200, {"serving": {"revision": pdp.revision, "engine": pdp.engine.name},
                               "revisions": await revisions(request.app[POOL])})


@routes.post("/v1/admin/policies")
async def push_policies(request: web.Request) -> web.Response:
    """Validate with the engine, then activate: every replica follows within a second.
    An invalid set is refused with the engine's own message; the serving revision stays."""
    identity = identity_of(request)
    if not identity.is_admin and identity.role != "governance":
        raise Forbidden("policy pushes need a governance or admin token")
    body = await read_model(request, PolicyPush)
    for name in body.modules:
        if not name.endswith(".rego") or "/" in name or name.startswith(".") or len(name) > 100:
            raise InvalidRequest(f"module names are plain *.rego file names: {name!r}")
    policies = PolicySet(
        modules={k: v for k, v in body.modules.items() if not k.endswith("_test.rego")},
        tests={k: v for k, v in body.modules.items() if k.endswith("_test.rego")},
    )
    # In a child process: some sources abort rego-cpp, which must not take this proxy down.
    # The pushed *_test.rego tests must pass too.
    results = await asyncio.to_thread(run_policy_tests, policies)
    failed = [r for r in results if not r.passed]
    if failed:
        if failed[0].name == "compile":
            raise PolicyRejected(f"the policy does not compile: {failed[0].error}")
        listed = "; ".join(f"{r.package}.{r.name}: {r.error}" for r in failed[:10])
        raise PolicyRejected(f"{len(failed)} policy test(s) failed: {listed}")
    revision = await activate(request.app[POOL], policies,
                              created_by=f"{identity.role}:{identity.agent_id}@{identity.team_id}")
    pinned = request.app[SETTINGS].policy_dir is not None
    return json_response(201, {"revision": revision, "active": True,
                               "note": "this replica serves its TOOLPROXY_POLICY_DIR" if pinned else None})
