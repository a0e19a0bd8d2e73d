"""GET /v1/admin/catalog: governance sees every tool — not only what the list-phase policy lets
it call — with its source, classification, pin state and availability; paged by name."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from proxy.errors import InvalidRequest
from proxy.web.access import require_governance
from proxy.web.admin.catalog_sources import SOURCES, Listed, every_tool
from proxy.web.admin.keys import PLUGIN_REGISTRY
from proxy.web.keys import CATALOG, POOL, identity_of
from proxy.web.params import query_choice, query_int
from proxy.web.responses import json_response
from wire.manifest import is_valid_tool_name

routes = web.RouteTableDef()

MAX_LIMIT = 500
DEFAULT_LIMIT = 100


def entry(item: Listed) -> dict[str, Any]:
    """The tool as governance reads it: classification, definition, `available` and `pin`."""
    m = item.manifest
    if m is None:
        base: dict[str, Any] = {"tool_id": item.tool_id, "version": None,
                                **(item.summary or {}), "input_schema": None,
                                "output_schema": None, "timeout_ms": None}
    else:
        base = {"tool_id": m.tool_id, "version": m.version, "category": m.category,
                "action": m.action, "risk": m.risk, "cost": m.cost.model_dump(mode="json"),
                "requires_approval": m.requires_approval, "network": m.network,
                "description": m.description, "input_schema": m.input_schema,
                "output_schema": m.output_schema, "timeout_ms": m.timeout_ms}
    return {**base, "capability": f"tool.{item.tool_id}.invoke", "source": item.source,
            "available": item.available, "pin": item.pin}


async def whole_catalog(app: web.Application) -> list[Listed]:
    return await every_tool(app[POOL], app[CATALOG], app[PLUGIN_REGISTRY])


@routes.get("/v1/admin/catalog")
async def list_catalog(request: web.Request) -> web.Response:
    """`source` filters, `after` (a tool name) pages on, `limit` bounds the page; `next` is the
    `after` of the next page, null on the last."""
    require_governance(identity_of(request), None)  # the catalog is every team's: no team data
    q = request.query
    source = query_choice(q, "source", SOURCES)
    after = q.get("after")
    if after is not None and not is_valid_tool_name(after):
        raise InvalidRequest("after is not a tool name")
    limit = query_int(q, "limit", DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
    items = [i for i in await whole_catalog(request.app)
             if (source is None or i.source == source) and (after is None or i.tool_id > after)]
    page = items[:limit]
    more = len(items) > limit
    return json_response(200, {"tools": [entry(i) for i in page],
                               "next": page[-1].tool_id if more else None})
