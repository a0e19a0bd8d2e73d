"""The data.query service: a named query run for the caller's team."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.data_query import store
from services.data_query.manifests import MANIFEST, ROW_LIMIT_DEFAULT
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef


def service(pool: asyncpg.Pool) -> Service:
    """The data.query service, bound to one connection pool."""

    async def run_query(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        query = store.QUERIES[args["query"]]
        params: dict[str, Any] = args.get("params", {})
        limit = int(args.get("limit", ROW_LIMIT_DEFAULT))
        if not ctx.team_id:
            raise ToolError("the call carries no team")
        records = await store.fetch(pool, query, [ctx.team_id, *query.args(params), limit + 1])
        rows = [{k: store.json_safe(v) for k, v in r.items()} for r in records[:limit]]
        return {"rows": rows, "row_count": len(rows), "truncated": len(records) > limit}

    return Service(name="data", tools=[ToolDef(manifest=MANIFEST, handler=run_query)])
