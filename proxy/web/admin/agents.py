"""/v1/admin/agents: registering and removing an agent are admin acts (an id is global: it
names the agent's NATS subject); listing is governance's, for its own team."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from proxy.web.keys import POOL, identity_of
from proxy.web.body import read_model
from proxy.web.admin.errors import AgentIdTaken, InvalidSchema
from proxy.errors import Forbidden, NotFound
from wire.ids import ID_PATTERN
from proxy.identity.identity import Identity
from proxy.web.access import governed_team
from proxy.web.responses import json_response
from services.agents.protocol import AGENT_ID_PATTERN
from services.agents.store import AgentRepository, AgentTaken
from services.agents.schemas import input_schema_problem

routes = web.RouteTableDef()


class AgentRegistration(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(pattern=AGENT_ID_PATTERN, max_length=64)
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    description: str = Field(min_length=1, max_length=2_000, pattern=r"^[^\x00]*$")
    input_schema: dict[str, Any]


class AgentKey(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(pattern=AGENT_ID_PATTERN, max_length=64)
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)


def _require_admin(identity: Identity) -> None:
    if not identity.is_admin:
        raise Forbidden("registering and removing agents needs an admin token")


def _repo(request: web.Request) -> AgentRepository:
    return AgentRepository(request.app[POOL])


@routes.post("/v1/admin/agents")
async def register(request: web.Request) -> web.Response:
    identity = identity_of(request)
    _require_admin(identity)
    body = await read_model(request, AgentRegistration)
    try:
        stored = orjson.dumps(body.input_schema)  # Postgres keeps it as jsonb
    except orjson.JSONEncodeError:
        raise InvalidSchema("the input schema holds an integer beyond 64 bits") from None
    if b"\\u0000" in stored:
        raise InvalidSchema("the input schema holds a NUL character")
    problem = input_schema_problem(body.input_schema)
    if problem is not None:
        raise InvalidSchema(problem)
    try:
        agent, created = await _repo(request).put(
            agent_id=body.agent_id, team_id=body.team_id, description=body.description,
            input_schema=body.input_schema, created_by=identity.actor)
    except AgentTaken:
        raise AgentIdTaken(f"agent id {body.agent_id!r} is registered to another team") from None
    return json_response(201 if created else 200, {"agent": agent.as_json(), "created": created})


@routes.get("/v1/admin/agents")
async def list_agents(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    return json_response(200, {"agents": [a.as_json() for a in await _repo(request).list(team)]})


@routes.post("/v1/admin/agents/remove")
async def remove(request: web.Request) -> web.Response:
    identity = identity_of(request)
    _require_admin(identity)
    body = await read_model(request, AgentKey)
    agent = await _repo(request).remove(body.team_id, body.agent_id)
    if agent is None:
        raise NotFound(f"no agent {body.agent_id!r} in team {body.team_id!r}")
    return json_response(200, {"agent": agent.as_json(), "removed": True})



