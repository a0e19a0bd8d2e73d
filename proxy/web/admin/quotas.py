"""Daily quotas: admins set them per team or agent; governance reads its own team's."""

from __future__ import annotations

import asyncpg
from aiohttp import web
from pydantic import Field

from pdp.data.quotas import Quota
from proxy.core.limits.counters import Counters
from proxy.web.admin.keys import LIMITER, QUOTA_REPO
from proxy.web.keys import POOL, identity_of
from proxy.web.body import read_model
from proxy.errors import Forbidden, NotFound
from wire.ids import ID_PATTERN
from proxy.web.access import applied_here, governed_team
from proxy.web.responses import json_response
from proxy.core.input_rules import Amount, Count, StrictModel

routes = web.RouteTableDef()


class QuotaBody(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    invocations: Count | None = None
    tokens: Count | None = None
    compute_units: Amount | None = None
    cost_1t: Amount | None = None


class QuotaKey(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)


async def used_today(pool: asyncpg.Pool, team_id: str, agent_id: str | None) -> Counters:
    row = await pool.fetchrow(
        """SELECT coalesce(sum(invocations), 0) AS i, coalesce(sum(tokens_used), 0) AS t,
                  coalesce(sum(compute_units), 0) AS c, coalesce(sum(cost_1t), 0) AS k
           FROM usage_daily WHERE day = (now() AT TIME ZONE 'UTC')::date AND team_id = $1
             AND ($2::text IS NULL OR agent_id = $2)""",
        team_id, agent_id,
    )
    return Counters(int(row["i"]), int(row["t"]), float(row["c"]), float(row["k"]))


@routes.post("/v1/admin/quotas")
async def set_quota(request: web.Request) -> web.Response:
    identity = identity_of(request)
    if not identity.is_admin:
        raise Forbidden("quotas are set by admin tokens")
    body = await read_model(request, QuotaBody)
    # Counters are kept only where a quota exists: start this one from today's rollup.
    used = await used_today(request.app[POOL], body.team_id, body.agent_id)
    await request.app[LIMITER].seed(body.team_id, body.agent_id, used)
    q = await request.app[QUOTA_REPO].put(
        Quota(team_id=body.team_id, agent_id=body.agent_id, invocations=body.invocations,
              tokens=body.tokens, compute_units=body.compute_units, cost_1t=body.cost_1t),
        by=identity.actor,
    )
    await applied_here(request, body.team_id)
    return json_response(201, {"quota": q.as_json()})


@routes.get("/v1/admin/quotas")
async def list_quotas(request: web.Request) -> web.Response:
    """Each quota with what was used today (UTC) and what remains."""
    team = governed_team(request, identity_of(request))
    limiter = request.app[LIMITER]
    out = []
    for q in await request.app[QUOTA_REPO].list(team):
        used = await limiter.counters(q.team_id, q.agent_id)
        entry = q.as_json()
        entry["used_today"] = {"invocations": used.invocations, "tokens": used.tokens,
                               "compute_units": used.compute_units, "cost_1t": used.cost_1t}
        entry["remaining_today"] = {
            kind: (None if limit is None else max(0, limit - entry["used_today"][kind]))
            for kind, limit in (("invocations", q.invocations), ("tokens", q.tokens),
                                ("compute_units", q.compute_units), ("cost_1t", q.cost_1t))
        }
        out.append(entry)
    return json_response(200, {"quotas": out})


@routes.post("/v1/admin/quotas/delete")
async def delete_quota(request: web.Request) -> web.Response:
    identity = identity_of(request)
    if not identity.is_admin:
        raise Forbidden("quotas are set by admin tokens")
    body = await read_model(request, QuotaKey)
    if not await request.app[QUOTA_REPO].delete(body.team_id, body.agent_id):
        raise NotFound("no such quota")
    await applied_here(request, body.team_id)
    return json_response(200, {"deleted": True})
