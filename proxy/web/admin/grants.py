"""Grant administration: admins for any team, governance for its own; agents never."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from pdp.data.grants import is_valid_capability
from proxy.web.access import applied_here, governed_team, require_governance
from proxy.web.admin.keys import GRANT_REPO
from proxy.web.keys import CATALOG, identity_of
from proxy.web.body import read_model
from proxy.errors import Forbidden, InvalidRequest, NotFound, UnknownTool
from wire.ids import ID_PATTERN
from proxy.identity.identity import Identity
from proxy.web.responses import json_response
from proxy.core.input_rules import CAPABILITY_PATTERN, StrictModel, Timestamp

routes = web.RouteTableDef()


class GrantRequest(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    capability: str = Field(pattern=CAPABILITY_PATTERN, max_length=80)
    expires_at: Timestamp | None = None


def _check_target(request: web.Request, identity: Identity, body: GrantRequest) -> None:
    require_governance(identity, body.team_id)
    if not is_valid_capability(body.capability):
        raise InvalidRequest("capability must be tool.<name>.invoke for one exact tool")
    name = body.capability.removeprefix("tool.").removesuffix(".invoke")
    if request.app[CATALOG].get(name) is None:
        raise UnknownTool(f"no tool named {name!r}")
    if body.agent_id is not None and body.agent_id == identity.agent_id:
        raise Forbidden("no self-authorization: you cannot grant capabilities to yourself")


@routes.post("/v1/admin/grants")
async def add_grant(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, GrantRequest)
    _check_target(request, identity, body)
    grant = await request.app[GRANT_REPO].add(
        team_id=body.team_id,
        agent_id=body.agent_id,
        capability=body.capability,
        created_by=identity.actor,
        expires_at=body.expires_at,
    )
    await applied_here(request, body.team_id)
    return json_response(201, {"grant": grant.as_json()})


@routes.get("/v1/admin/grants")
async def list_grants(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    grants = await request.app[GRANT_REPO].list(team)
    return json_response(200, {"grants": [g.as_json() for g in grants]})


@routes.post("/v1/admin/grants/revoke")
async def revoke_grant(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, GrantRequest)
    require_governance(identity, body.team_id)
    grant = await request.app[GRANT_REPO].revoke(
        team_id=body.team_id, agent_id=body.agent_id, capability=body.capability
    )
    if grant is None:
        raise NotFound("no such grant")
    await applied_here(request, body.team_id)
    return json_response(200, {"grant": grant.as_json()})
