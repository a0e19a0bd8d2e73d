"""Standing approvals: governance grants (for its own team; admins for any), lists and revokes
them; agents never reach these routes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
from aiohttp import web
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field

from proxy.web.admin.keys import STANDING, STANDING_REPO
from proxy.web.keys import CATALOG, identity_of
from proxy.web.body import read_model
from proxy.errors import Forbidden, InvalidRequest, NotFound, UnknownTool
from wire.ids import ID_PATTERN
from proxy.web.access import governed_team, require_governance
from proxy.web.responses import json_response
from wire.manifest import is_valid_tool_name

routes = web.RouteTableDef()

MAX_ARGS_BYTES = 4 << 10
MAX_SCHEMA_BYTES = 8 << 10
MAX_LIFETIME = timedelta(days=366)
STATES = ("active", "expired", "exhausted", "revoked")


class StandingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    tool: str = Field(max_length=64)
    # The constraint on the call's arguments: these exact values, and/or this JSON Schema.
    args: dict[str, Any] | None = Field(default=None, max_length=32)
    args_schema: dict[str, Any] | None = Field(default=None, max_length=32)
    expires_at: datetime
    max_calls: int = Field(ge=1, le=1_000_000)
    reason: str = Field(default="", max_length=500)


def _json_problem(value: Any, depth: int = 0) -> str | None:
    """NUL characters (Postgres refuses them), integers beyond 64 bits, too deep nesting."""
    if depth > 16:
        return "nested too deeply"
    if isinstance(value, str):
        return "contains a NUL character" if "\x00" in value else None
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return None
    if isinstance(value, int):
        return None if -(1 << 63) <= value < (1 << 63) else "has an integer beyond 64 bits"
    if isinstance(value, list):
        items: list[Any] = value
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    else:
        return "is not JSON"
    for item in items:
        problem = _json_problem(item, depth + 1)
        if problem is not None:
            return problem
    return None


def _check_constraint(body: StandingRequest) -> None:
    for name, value, limit in (("args", body.args, MAX_ARGS_BYTES),
                               ("args_schema", body.args_schema, MAX_SCHEMA_BYTES)):
        if value is None:
            continue
        problem = _json_problem(value)
        if problem is not None:
            raise InvalidRequest(f"{name} {problem}")
        if len(orjson.dumps(value)) > limit:
            raise InvalidRequest(f"{name} is larger than {limit} bytes")
    if body.args_schema is not None:
        text = orjson.dumps(body.args_schema).decode()
        if '"$ref"' in text or '"$dynamicRef"' in text:
            raise InvalidRequest("args_schema must be self-contained (no $ref)")
        try:
            Draft202012Validator.check_schema(body.args_schema)
        except SchemaError as exc:
            raise InvalidRequest(f"args_schema is not a valid JSON Schema: {exc.message[:300]}") from None


@routes.post("/v1/admin/standing-approvals")
async def add_standing(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, StandingRequest)
    require_governance(identity, body.team_id)
    if "\x00" in body.reason:
        raise InvalidRequest("reason contains a NUL character")
    if not is_valid_tool_name(body.tool):
        raise InvalidRequest("tool is not a valid tool name")
    manifest = request.app[CATALOG].get(body.tool)
    if manifest is None:
        raise UnknownTool(f"no tool named {body.tool!r}")
    if not manifest.requires_approval:
        raise InvalidRequest(f"{body.tool} needs no approval: a standing approval would change nothing")
    if body.agent_id is not None and body.agent_id == identity.agent_id:
        raise Forbidden("no self-authorization: you cannot pre-approve your own calls")
    if body.expires_at.tzinfo is None:
        raise InvalidRequest("expires_at needs a time zone (e.g. 2030-01-01T00:00:00Z)")
    now = datetime.now(timezone.utc)
    if body.expires_at <= now:
        raise InvalidRequest("expires_at is in the past")
    if body.expires_at > now + MAX_LIFETIME:
        raise InvalidRequest("expires_at is more than 366 days away")
    _check_constraint(body)
    created = await request.app[STANDING_REPO].add(
        team_id=body.team_id, agent_id=body.agent_id, tool=body.tool, args=body.args,
        args_schema=body.args_schema, expires_at=body.expires_at, max_calls=body.max_calls,
        reason=body.reason, created_by=identity.actor,
        creator_agent=identity.agent_id, creator_team=identity.team_id,
    )
    # In force on this replica before it answers; the others follow their NOTIFY.
    await request.app[STANDING].reload_team(body.team_id)
    return json_response(201, created.as_json())


@routes.get("/v1/admin/standing-approvals")
async def list_standing(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    q = request.query
    tool = q.get("tool")
    if tool is not None and not is_valid_tool_name(tool):
        raise InvalidRequest("tool is not a valid tool name")
    state = q.get("state", "all")
    if state not in (*STATES, "all"):
        raise InvalidRequest(f"state must be one of {', '.join(STATES)} or all")
    try:
        limit = min(max(int(q.get("limit", "200")), 1), 1000)
    except ValueError:
        raise InvalidRequest("limit must be an integer") from None
    rows = await request.app[STANDING_REPO].list(team, tool=tool, limit=limit)
    listed = [a.as_json() for a in rows]
    if state != "all":
        listed = [a for a in listed if a["state"] == state]
    return json_response(200, {"standing_approvals": listed})


@routes.post("/v1/admin/standing-approvals/{standing_approval_id}/revoke")
async def revoke_standing(request: web.Request) -> web.Response:
    """Takes effect at once on every replica: each call is counted in Postgres, where the
    revocation is; the replicas' caches follow through NOTIFY within milliseconds."""
    identity = identity_of(request)
    require_governance(identity, None)
    repo = request.app[STANDING_REPO]
    sid = request.match_info["standing_approval_id"]
    current = await repo.get(sid)
    # Another team's standing approval does not exist for this caller (admins see all).
    if current is None or (current.team_id != identity.team_id and not identity.is_admin):
        raise NotFound("no such standing approval")
    revoked = await repo.revoke(sid, by=identity.actor)
    if revoked is None:
        raise NotFound("no such standing approval")
    await request.app[STANDING].reload_team(revoked.team_id)
    return json_response(200, revoked.as_json())
