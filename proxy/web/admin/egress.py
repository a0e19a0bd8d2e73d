"""browser.full's egress allowlists: governance sets its own team's, admins any team's."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from proxy.web.keys import POOL, identity_of
from proxy.web.body import read_model
from proxy.web.admin.errors import InvalidHostPattern
from wire.ids import ID_PATTERN
from proxy.web.access import governed_team, require_governance
from proxy.web.responses import json_response
from services.browser import store as egress
from infra.netaddr import classify
from services.netguard.hosts import MAX_PATTERN_LENGTH, MAX_PATTERNS, HostPattern, PatternError

routes = web.RouteTableDef()


class EgressBody(BaseModel):
    """The team's whole list (it replaces the previous one; [] allows nothing)."""

    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    hosts: list[Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_LENGTH)]] = Field(
        max_length=MAX_PATTERNS,
        description="host[:port] patterns: example.com, *.example.com, example.com:8443, "
        "example.com:* (no port: the scheme's default)",
    )


def egress_patterns(hosts: list[str]) -> list[HostPattern]:
    """Parsed, deduplicated; an IP literal that is not public is refused here (browser.full
    never reaches one, so listing it could only mislead)."""
    out: list[HostPattern] = []
    for text in hosts:
        try:
            pattern = HostPattern.parse(text)
        except PatternError as exc:
            raise InvalidHostPattern(str(exc)) from None
        if pattern.ip is not None and classify(pattern.ip) is not None:
            raise InvalidHostPattern(f"{text!r} is not a public address: browser.full never reaches it")
        if pattern not in out:
            out.append(pattern)
    return out


@routes.post("/v1/admin/egress")
async def put_egress(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, EgressBody)
    require_governance(identity, body.team_id)
    patterns = egress_patterns(body.hosts)
    entry = await egress.put_hosts(request.app[POOL], body.team_id, patterns,
                                   by=identity.actor)
    return json_response(200, {"egress": entry})


@routes.get("/v1/admin/egress")
async def list_egress(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    return json_response(200, {"egress": await egress.list_hosts(request.app[POOL], team)})
