"""The search service: search.index and search.lite, handlers over the search store."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.sdk import CallContext, Service
from services.sdk.records import agent_of, team_of
from services.sdk.service import ToolDef, ToolResult
from services.search import manifests
from services.search.config import SearchSettings
from services.search.errors import DocumentTooLarge, SearchTimeout
from services.search.store import STATEMENT_TIMEOUT_MS, search, upsert


def service(pool: asyncpg.Pool, settings: SearchSettings | None = None) -> Service:
    """The search service, bound to one connection pool and its team bounds."""
    limits = settings or SearchSettings()

    async def index(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        doc_id = args["doc_id"]
        try:
            replaced = await upsert(pool, team, doc_id, args["title"], args["text"],
                                    sorted(args.get("tags", [])), agent, limits)
        except asyncpg.ProgramLimitExceededError:
            raise DocumentTooLarge("the document is too large to index (its word index exceeds "
                                   "1 MB)") from None
        return ToolResult(output={"doc_id": doc_id, "indexed": True, "replaced": replaced},
                          object_refs=[{"type": "document", "id": doc_id}])

    async def lite(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        limit = int(args.get("limit", manifests.LIMIT_DEFAULT))
        try:
            hits, capped = await search(pool, team, args["query"], limit,
                                        sorted(args.get("tags", [])))
        except asyncpg.QueryCanceledError:
            raise SearchTimeout(f"the search exceeded its {STATEMENT_TIMEOUT_MS} ms time limit"
                                ) from None
        return ToolResult(output={"hits": hits, "count": len(hits), "capped": capped},
                          object_refs=[{"type": "document", "id": h["doc_id"], "rank": h["rank"]}
                                       for h in hits])

    return Service(name="search", tools=[ToolDef(manifests.INDEX, index),
                                         ToolDef(manifests.LITE, lite)])
