"""Usage: the caller's team totals (admins may name another team), by day or over a range."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from aiohttp import web

from proxy.web.keys import POOL, identity_of
from proxy.errors import Forbidden, InvalidRequest
from proxy.web.params import query_choice, query_date, query_id
from proxy.web.responses import json_response
from proxy.records.usage import GROUPS, team_day_totals, usage_report

routes = web.RouteTableDef()

MAX_RANGE_DAYS = 366


@routes.get("/v1/usage")
async def usage(request: web.Request) -> web.Response:
    """`?day=D` (default today, UTC): that day's totals and per-tool rows.
    `?from=D&to=D&group_by=tool|agent|day`: totals over the range, grouped."""
    identity = identity_of(request)
    q = request.query
    team = query_id(q, "team_id") or identity.team_id
    if team != identity.team_id and not identity.is_admin:
        raise Forbidden("only admins may read another team's usage")
    pool = request.app[POOL]
    if "from" in q or "to" in q or "group_by" in q:
        today = datetime.now(timezone.utc).date()
        end = query_date(q, "to") or today
        start = query_date(q, "from") or end
        if start > end:
            raise InvalidRequest("from must not be after to")
        if end - start > timedelta(days=MAX_RANGE_DAYS):
            raise InvalidRequest(f"a range covers at most {MAX_RANGE_DAYS} days")
        group_by = query_choice(q, "group_by", tuple(GROUPS), "tool")
        assert group_by is not None
        return json_response(200, await usage_report(pool, team, start, end, group_by))
    day = query_date(q, "day") or datetime.now(timezone.utc).date()
    return json_response(200, await team_day_totals(pool, team, day))
