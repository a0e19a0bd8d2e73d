"""Usage: the caller's team totals (admins may name another team), by day or over a range."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from aiohttp import web

from proxy.appkeys import POOL, identity_of
from proxy.errors import Forbidden, InvalidRequest
from proxy.identity import is_valid_id
from proxy.routes.tools import json_response
from proxy.usage import GROUPS, team_day_totals, usage_report

routes = web.RouteTableDef()

MAX_RANGE_DAYS = 366


def _day(value: str | None, name: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be YYYY-MM-DD") from None


@routes.get("/v1/usage")
async def usage(request: web.Request) -> web.Response:
    """`?day=D` (default today, UTC): that day's totals and per-tool rows.
    `?from=D&to=D&group_by=tool|agent|day`: totals over the range, grouped."""
    identity = identity_of(request)
    q = request.query
    team = q.get("team_id", identity.team_id)
    if not is_valid_id(team):
        raise InvalidRequest("team_id is not a valid id")
    if team != identity.team_id and not identity.is_admin:
        raise Forbidden("only admins may read another team's usage")
    pool = request.app[POOL]
    if "from" in q or "to" in q or "group_by" in q:
        today = datetime.now(timezone.utc).date()
        end = _day(q.get("to"), "to") or today
        start = _day(q.get("from"), "from") or end
        if start > end:
            raise InvalidRequest("from must not be after to")
        if end - start > timedelta(days=MAX_RANGE_DAYS):
            raise InvalidRequest(f"a range covers at most {MAX_RANGE_DAYS} days")
        group_by = q.get("group_by", "tool")
        if group_by not in GROUPS:
            raise InvalidRequest("group_by must be tool, agent or day")
        return json_response(200, await usage_report(pool, team, start, end, group_by))
    day = _day(q.get("day"), "day") or datetime.now(timezone.utc).date()
    return json_response(200, await team_day_totals(pool, team, day))
