"""/v1/admin/toolsets: governance names a subset of the catalog for its own team (admins: any
team), served at /mcp/sets/<name>. A set grants nothing: the policy still decides each tool."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from pydantic import Field

from proxy.core.input_rules import TOOL_NAME_PATTERN, StrictModel
from proxy.core.toolsets import (
    MAX_DESCRIPTION,
    MAX_TOOLS,
    NAME_PATTERN,
    ToolSetRepository,
    TooManySets,
    is_valid_name,
)
from proxy.errors import NotFound, UnknownTool
from proxy.identity.identity import Identity
from proxy.web.access import governed_team, require_governance
from proxy.web.admin.catalog import whole_catalog
from proxy.web.admin.errors import ToolSetLimit
from proxy.web.body import read_model
from proxy.web.keys import POOL, TOOLSETS, identity_of
from proxy.web.params import query_id
from proxy.web.responses import json_response
from wire.ids import ID_PATTERN
from wire.manifest import TOOL_NAME_MAX

routes = web.RouteTableDef()

ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN, max_length=TOOL_NAME_MAX)]


class ToolSetBody(StrictModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=64,
                      description="lowercase letters, digits, '-' and '_'; the team's own")
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tools: list[ToolName] = Field(min_length=1, max_length=MAX_TOOLS)
    description: str = Field(default="", max_length=MAX_DESCRIPTION, pattern=r"^[^\x00]*$")


def _repo(request: web.Request) -> ToolSetRepository:
    return ToolSetRepository(request.app[POOL])


def _target(request: web.Request, identity: Identity) -> tuple[str, str]:
    """The set a path names: in `?team_id=` (governance: its own only), else the caller's team."""
    name = request.match_info["name"]
    if not is_valid_name(name):
        raise NotFound("no such tool set")
    team = query_id(request.query, "team_id") or identity.team_id
    require_governance(identity, team)
    return team, name


@routes.post("/v1/admin/toolsets")
async def put_toolset(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, ToolSetBody)
    require_governance(identity, body.team_id)
    tools = list(dict.fromkeys(body.tools))
    known = {item.tool_id for item in await whole_catalog(request.app)}
    unknown = [t for t in tools if t not in known]
    if unknown:
        raise UnknownTool(f"not in the catalog: {', '.join(unknown[:10])}",
                          extra={"unknown_tools": unknown})
    try:
        toolset, created = await _repo(request).put(
            team_id=body.team_id, name=body.name, tools=tools, description=body.description,
            by=identity.actor)
    except TooManySets as exc:
        raise ToolSetLimit(str(exc)) from None
    await request.app[TOOLSETS].reload()  # this replica at once; the others on NOTIFY
    return json_response(201 if created else 200, {"toolset": toolset.as_json(), "created": created})


@routes.get("/v1/admin/toolsets")
async def list_toolsets(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    return json_response(200, {"toolsets": [s.as_json() for s in await _repo(request).list(team)]})


@routes.get("/v1/admin/toolsets/{name}")
async def get_toolset(request: web.Request) -> web.Response:
    team, name = _target(request, identity_of(request))
    toolset = await _repo(request).get(team, name)
    if toolset is None:
        raise NotFound(f"no tool set {name!r} in team {team!r}")
    return json_response(200, {"toolset": toolset.as_json()})


@routes.delete("/v1/admin/toolsets/{name}")
async def delete_toolset(request: web.Request) -> web.Response:
    team, name = _target(request, identity_of(request))
    toolset = await _repo(request).delete(team, name)
    if toolset is None:
        raise NotFound(f"no tool set {name!r} in team {team!r}")
    await request.app[TOOLSETS].reload()
    return json_response(200, {"toolset": toolset.as_json(), "deleted": True})

