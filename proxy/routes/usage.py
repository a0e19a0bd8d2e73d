"""Usage: the caller's team totals for a day (admins may name another team)."""

from __future__ import annotations

from datetime import date, datetime, timezone

from aiohttp import web

from proxy.appkeys import POOL, identity_of
from proxy.errors import Forbidden, InvalidRequest
from proxy.identity import is_valid_id
from proxy.routes.tools import json_response
from proxy.usage import team_day_totals

routes = web.RouteTableDef()


@routes.get("/v1/usage")
async def usage(request: web.Request) -> web.Response:
    identity = identity_of(request)
    raw_day = request.query.get("day")
    try:
        day = date.fromisoformat(raw_day) if raw_day else datetime.now(timezone.utc).date()
    except ValueError:
        raise InvalidRequest("day must be YYYY-MM-DD") from None
    team = request.query.get("team_id", identity.team_id)
    if team != identity.team_id and not identity.is_admin:
        raise Forbidden("only admins may read another team's usage")
    if not is_valid_id(team):
        raise InvalidRequest("team_id is not a valid id")
    return json_response(200, await team_day_totals(request.app[POOL], team, day))
