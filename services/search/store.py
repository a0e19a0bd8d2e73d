"""The SQL of the search service: upsert a document within the team's bounds, rank and snippet
the team's matches."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.search.config import SearchSettings
from services.search.errors import TeamDocumentLimit, TeamIndexFull

STATEMENT_TIMEOUT_MS = 2_000
# Marks a model reads as emphasis; never HTML (a snippet is text from the document).
HEADLINE_OPTIONS = "StartSel=**, StopSel=**, MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=\" … \""

UPSERT = """
INSERT INTO search_documents AS d (team_id, doc_id, title, body, tags, indexed_by)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (team_id, doc_id) DO UPDATE
    SET title = EXCLUDED.title, body = EXCLUDED.body, tags = EXCLUDED.tags,
        indexed_by = EXCLUDED.indexed_by, indexed_at = now()
RETURNING (xmax <> 0) AS replaced
"""
_LOCK_USAGE = """INSERT INTO search_usage AS u (team_id) VALUES ($1)
                 ON CONFLICT (team_id) DO UPDATE SET docs = u.docs
                 RETURNING docs, bytes"""
_EXISTING = """SELECT octet_length(title) + octet_length(body) FROM search_documents
               WHERE team_id = $1 AND doc_id = $2"""
_USAGE = "UPDATE search_usage SET docs = docs + $2, bytes = bytes + $3 WHERE team_id = $1"

# Rank the team's matches (the (team, tsv) GIN index finds them), keep the best, and only
# then build snippets: ts_headline re-parses a document, so it runs on `limit` rows at most.
# ts_rank reads every candidate's tsvector, so a query matching most of a large corpus (one
# very common word) ranks the first MAX_RANKED matches found, and says so (`candidates`).
# The tsquery is written inline so that a plan for one query can use the statistics of its
# words (the planner folds the immutable websearch_to_tsquery of a parameter).
MAX_RANKED = 10_000
SEARCH = f"""
SELECT doc_id, title, tags, rank, candidates,
       ts_headline('english', body, websearch_to_tsquery('english', $2), '{HEADLINE_OPTIONS}')
           AS snippet
FROM (
    SELECT m.doc_id, m.title, m.body, m.tags, count(*) OVER () AS candidates,
           ts_rank(m.tsv, websearch_to_tsquery('english', $2)) AS rank
    FROM (
        SELECT d.doc_id, d.title, d.body, d.tags, d.tsv
        FROM search_documents d
        WHERE d.team_id = $1 AND d.tsv @@ websearch_to_tsquery('english', $2)
          AND d.tags @> $4::text[]
        LIMIT {MAX_RANKED}
    ) m
    ORDER BY rank DESC, m.doc_id
    LIMIT $3
) best
ORDER BY rank DESC, doc_id
"""


async def upsert(pool: asyncpg.Pool, team: str, doc_id: str, title: str, body: str,
                 tags: list[str], agent: str, limits: SearchSettings) -> bool:
    """Add or replace one document, all or nothing, within the team's bounds. True if replaced.
    The team's usage row is locked first, so its writers take turns and the bounds hold."""
    size = len(title.encode()) + len(body.encode())
    async with pool.acquire() as conn, conn.transaction():
        usage = await conn.fetchrow(_LOCK_USAGE, team)
        old = await conn.fetchval(_EXISTING, team, doc_id)
        docs = usage["docs"] + (1 if old is None else 0)
        size_after = usage["bytes"] - (old or 0) + size
        if docs > limits.team_max_docs:
            raise TeamDocumentLimit(f"your team has already indexed {usage['docs']} documents, "
                                    "the most it may")
        if size_after > limits.team_max_bytes:
            raise TeamIndexFull(f"this document would bring your team's index to {size_after} "
                                f"bytes, over its {limits.team_max_bytes}-byte limit")
        replaced = bool(await conn.fetchval(UPSERT, team, doc_id, title, body, tags, agent))
        await conn.execute(_USAGE, team, docs - usage["docs"], size_after - usage["bytes"])
    return replaced


async def search(pool: asyncpg.Pool, team: str, query: str, limit: int,
                 tags: list[str]) -> tuple[list[dict[str, Any]], bool]:
    """The best hits, and whether the matches reached MAX_RANKED (only those were ranked)."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        rows = await conn.fetch(SEARCH, team, query, limit, tags)
    hits = [{"doc_id": r["doc_id"], "title": r["title"], "rank": round(float(r["rank"]), 6),
             "snippet": r["snippet"], "tags": list(r["tags"])} for r in rows]
    return hits, bool(rows) and rows[0]["candidates"] >= MAX_RANKED
