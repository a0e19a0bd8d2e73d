"""Team rules: a team's governance tightens its own team's decisions (admins: any team's).

The team-scoped counterpart of the global policy modules (which only admins push): a rule
denies one tool to the team, requires an approval for each call of it, lowers its rate or
shortens its deadline. It can never allow anything, and the policy sees a team's rules only
for subjects of that team.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import ConfigDict, Field, model_validator

from pdp.data.team_rules import TeamRuleRepository
from proxy.web.admin.keys import TEAM_RULE_REPO
from proxy.web.keys import CATALOG, identity_of
from proxy.web.body import read_model
from proxy.errors import NotFound, UnknownTool
from wire.ids import ID_PATTERN
from proxy.web.access import applied_here, governed_team, require_governance
from proxy.web.responses import json_response
from proxy.core.input_rules import TOOL_NAME_PATTERN, PerMinute, StrictModel, Timestamp, TimeoutMs
from wire.manifest import TOOL_NAME_MAX

routes = web.RouteTableDef()


class TeamRuleKey(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tool: str = Field(pattern=TOOL_NAME_PATTERN, max_length=TOOL_NAME_MAX)


# The document states the model validator's rule: at least one field tightens something.
_TIGHTENS = {"anyOf": [
    {"required": ["deny"], "properties": {"deny": {"const": True}}},
    {"required": ["require_approval"], "properties": {"require_approval": {"const": True}}},
    {"required": ["timeout_ms"], "properties": {"timeout_ms": {"type": "integer"}}},
    {"required": ["rate_per_minute"], "properties": {"rate_per_minute": {"type": "integer"}}},
]}


class TeamRuleRequest(TeamRuleKey):
    model_config = ConfigDict(json_schema_extra=_TIGHTENS)

    deny: bool = False
    require_approval: bool = False
    timeout_ms: TimeoutMs | None = None
    rate_per_minute: PerMinute | None = None
    reason: str = Field(default="", max_length=500)
    expires_at: Timestamp | None = None

    @model_validator(mode="after")
    def _tightens(self) -> TeamRuleRequest:
        if not (self.deny or self.require_approval or self.timeout_ms is not None
                or self.rate_per_minute is not None):
            raise ValueError("a rule sets deny, require_approval, timeout_ms or rate_per_minute")
        return self


def _repo(request: web.Request) -> TeamRuleRepository:
    return request.app[TEAM_RULE_REPO]


@routes.post("/v1/admin/team-rules")
async def put_team_rule(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, TeamRuleRequest)
    require_governance(identity, body.team_id)
    if request.app[CATALOG].get(body.tool) is None:
        raise UnknownTool(f"no tool named {body.tool!r}")
    rule = await _repo(request).put(
        team_id=body.team_id, tool=body.tool, deny=body.deny,
        require_approval=body.require_approval, timeout_ms=body.timeout_ms,
        rate_per_minute=body.rate_per_minute, reason=body.reason,
        created_by=identity.actor,
        expires_at=body.expires_at,
    )
    await applied_here(request, body.team_id)
    return json_response(201, {"team_rule": rule.as_json()})


@routes.get("/v1/admin/team-rules")
async def list_team_rules(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    return json_response(200, {"team_rules": [r.as_json() for r in await _repo(request).list(team)]})


@routes.post("/v1/admin/team-rules/delete")
async def delete_team_rule(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, TeamRuleKey)
    require_governance(identity, body.team_id)
    rule = await _repo(request).delete(team_id=body.team_id, tool=body.tool)
    if rule is None:
        raise NotFound("no such team rule")
    await applied_here(request, body.team_id)
    return json_response(200, {"team_rule": rule.as_json()})
