"""search.index and search.lite through the whole pipeline, on Postgres full-text search."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import pytest

from services.search import service as search_service
from services.sdk.service import CallContext
from services.search.config import SearchSettings
from tests.support.calls import invoke
from tests.support.data_helpers import BOUNDARY, assert_bad_input, grant_tools, ok
from tests.support.tool_harness import run_tool

DOCS = {
    "runbook-db": ("Database failover runbook",
                   "When the primary database fails, promote the replica and repoint the "
                   "connection pool. Failover takes about thirty seconds.", ["ops", "db"]),
    "onboarding": ("Onboarding guide",
                   "New engineers get a laptop, a token and a tour of the deployment pipeline.",
                   ["people"]),
    "postmortem-7": ("Postmortem: replica lag",
                     "Replication lag reached ten minutes because the database vacuum stalled.",
                     ["ops"]),
}


async def indexed(client, token, team) -> str:
    await grant_tools(client, token, team, "search.index", "search.lite")
    tok = token(team=team)
    for doc_id, (title, text, tags) in DOCS.items():
        body = await ok(client, tok, "search.index",
                        {"doc_id": doc_id, "title": title, "text": text, "tags": tags})
        assert body["output"] == {"doc_id": doc_id, "indexed": True, "replaced": False}
        assert body["object_refs"] == [{"type": "document", "id": doc_id}]
    return tok


async def test_search_ranks_stems_and_snippets(client, token, team) -> None:
    tok = await indexed(client, token, team)
    body = await ok(client, tok, "search.lite", {"query": "database replicas"})
    hits = body["output"]["hits"]
    # Stemmed ("replicas" finds "replica"), the title match ranked first.
    assert {h["doc_id"] for h in hits} == {"postmortem-7", "runbook-db"}
    assert hits[0]["rank"] >= hits[1]["rank"] > 0
    assert body["output"]["count"] == 2
    for h in hits:
        assert "**" in h["snippet"] and h["title"] == DOCS[h["doc_id"]][0]
        assert h["tags"] == sorted(DOCS[h["doc_id"]][2])
    assert body["object_refs"] == [{"type": "document", "id": h["doc_id"], "rank": h["rank"]}
                                   for h in hits]
    snippet = next(h["snippet"] for h in hits if h["doc_id"] == "runbook-db")
    assert "**database**" in snippet.lower()


async def test_web_search_syntax_phrases_exclusions_or(client, token, team) -> None:
    tok = await indexed(client, token, team)

    async def ids(query: str, **more) -> list[str]:
        out = (await ok(client, tok, "search.lite", {"query": query, **more}))["output"]
        return sorted(h["doc_id"] for h in out["hits"])

    assert await ids('"promote the replica"') == ["runbook-db"]
    assert await ids("database -vacuum") == ["runbook-db"]
    assert await ids("laptop or vacuum") == ["onboarding", "postmortem-7"]
    assert await ids("database", tags=["ops", "db"]) == ["runbook-db"]
    assert await ids("database", limit=1) in (["runbook-db"], ["postmortem-7"])
    assert await ids("the") == []  # only a stop word: an empty query matches nothing
    assert await ids("nonexistentword") == []
    # Operators are syntax, never SQL: odd input is just words.
    assert await ids("'); DROP TABLE search_documents; --") == []


async def test_index_replaces_a_document_in_place(client, token, team, db_pool) -> None:
    tok = await indexed(client, token, team)
    body = await ok(client, tok, "search.index",
                    {"doc_id": "onboarding", "title": "Offboarding guide", "text": "Return the badge."})
    assert body["output"]["replaced"] is True
    assert (await ok(client, tok, "search.lite", {"query": "laptop"}))["output"]["hits"] == []
    hits = (await ok(client, tok, "search.lite", {"query": "badge"}))["output"]["hits"]
    assert [(h["doc_id"], h["title"], h["tags"]) for h in hits] == [
        ("onboarding", "Offboarding guide", [])]
    n = await db_pool.fetchval("SELECT count(*) FROM search_documents WHERE team_id = $1", team)
    assert n == len(DOCS)


async def test_a_team_never_finds_another_teams_documents(client, token, team) -> None:
    await indexed(client, token, team)
    other = f"t_{uuid.uuid4().hex[:10]}"
    await grant_tools(client, token, other, "search.lite", "search.index")
    tok = token(team=other)
    assert (await ok(client, tok, "search.lite", {"query": "database"}))["output"] == {
        "hits": [], "count": 0, "capped": False}
    # The same doc_id in another team is another document.
    body = await ok(client, tok, "search.index",
                    {"doc_id": "runbook-db", "title": "Ours", "text": "database notes"})
    assert body["output"]["replaced"] is False
    mine = (await ok(client, token(team=team), "search.lite", {"query": "ours"}))["output"]
    assert mine["hits"] == []


async def test_search_needs_grants_index_and_read_separately(client, token, team, db_pool) -> None:
    tok = token(team=team)
    status, body = await invoke(client, tok, "search.lite", {"query": "x"})
    assert (status, body["error"]["reasons"]) == (403, ["grant_required"])
    await grant_tools(client, token, team, "search.lite")
    status, body = await invoke(client, tok, "search.index", {"doc_id": "a", "title": "t", "text": "x"})
    assert (status, body["error"]["reasons"]) == (403, ["grant_required"])
    assert await db_pool.fetchval("SELECT count(*) FROM search_documents WHERE team_id = $1", team) == 0


@pytest.mark.parametrize("tool, args, where", [
    ("search.index", {"doc_id": "../x", "title": "t", "text": "x"}, "$.doc_id"),
    ("search.index", {"doc_id": "a" * 129, "title": "t", "text": "x"}, "$.doc_id"),
    ("search.index", {"doc_id": "a", "title": " ", "text": "x"}, "$.title"),
    ("search.index", {"doc_id": "a", "title": "t", "text": "x\u0000y"}, BOUNDARY),
    ("search.index", {"doc_id": "a", "title": "t", "text": "x" * 100_001}, "$.text"),
    ("search.index", {"doc_id": "a", "title": "t", "text": "x", "tags": ["a b"]}, "$.tags[0]"),
    ("search.index", {"doc_id": "a", "title": "t", "text": "x", "tags": [str(i) for i in range(17)]},
     "$.tags"),
    ("search.lite", {"query": ""}, "$.query"),
    ("search.lite", {"query": "x" * 501}, "$.query"),
    ("search.lite", {"query": "a\u0000"}, BOUNDARY),
    ("search.lite", {"query": "x", "limit": 51}, "$.limit"),
    ("search.lite", {"query": "x", "limit": 2 ** 70}, BOUNDARY),
    ("search.lite", {"query": "x", "team_id": "other"}, "$"),
])
async def test_bad_input_is_refused_before_the_service(client, token, team, db_pool,
                                                       tool, args, where) -> None:
    await grant_tools(client, token, team, "search.index", "search.lite")
    status, body = await invoke(client, token(team=team), tool, args)
    assert_bad_input(status, body, where)
    assert await db_pool.fetchval("SELECT count(*) FROM search_documents WHERE team_id = $1", team) == 0


async def test_the_search_sql_ranks_and_bounds_over_many_documents(db_pool: asyncpg.Pool) -> None:
    """MAX_RANKED + 500 documents of one team (rolled back afterwards): exact matches only,
    best first, at most `limit`; a query matching more than MAX_RANKED ranks that many and
    says so. (Which index the planner takes is printed by bench/search.py.)"""
    from services.search.store import MAX_RANKED, SEARCH

    team = f"t_{uuid.uuid4().hex[:10]}"
    rows = [(team, f"d{i}", f"word7 in the title {i}" if i == 1007 else f"title {i}",
             f"word{i % 500} filler text number {i}", ["even"] if i % 2 == 0 else [], "a")
            for i in range(MAX_RANKED + 500)]
    async with db_pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.copy_records_to_table(
                "search_documents", records=rows,
                columns=["team_id", "doc_id", "title", "body", "tags", "indexed_by"])
            hits = await conn.fetch(SEARCH, team, "word7", 10, [])
            even = await conn.fetch(SEARCH, team, "word7", 10, ["even"])
            top = await conn.fetch(SEARCH, team, "filler", 4, [])
        finally:
            await tx.rollback()
    ids = [h["doc_id"] for h in hits]
    assert ids[0] == "d1007"  # the title match outranks the body matches
    assert sorted(ids[1:]) == sorted(f"d{i}" for i in range(7, MAX_RANKED + 500, 500) if i != 1007)[:9]
    assert all(h["candidates"] == 21 for h in hits)
    assert hits[0]["rank"] > hits[1]["rank"]
    assert all("**word7**" in h["snippet"] for h in hits[1:])
    assert [h["doc_id"] for h in even] == []  # every word7 document is odd
    assert len(top) == 4 and top[0]["candidates"] == MAX_RANKED  # "filler" matches them all


# --- the team's bounds ---------------------------------------------------------------------

SMALL = SearchSettings(team_max_docs=3, team_max_bytes=250)


async def index(pool: asyncpg.Pool, team: str, doc_id: str, text: str,
                settings: SearchSettings = SMALL) -> str | None:
    """The tool's own error code, or None when it indexed."""
    (tool,) = [t for t in search_service.service(pool, settings).tools
               if t.manifest.tool_id == "search.index"]
    ctx = CallContext(call_id=str(uuid.uuid4()), decision_id="d", team_id=team, agent_id="a",
                      run_id=None, deadline=time.time() + 10)
    out: dict[str, Any] = await run_tool(tool, {"doc_id": doc_id, "title": "t", "text": text}, ctx)
    return None if out["ok"] else out["error"]["code"]


async def usage(pool: asyncpg.Pool, team: str) -> tuple[int, int]:
    row = await pool.fetchrow("SELECT docs, bytes FROM search_usage WHERE team_id = $1", team)
    actual = await pool.fetchrow(
        "SELECT count(*) AS n, coalesce(sum(octet_length(title) + octet_length(body)), 0) AS b "
        "FROM search_documents WHERE team_id = $1", team)
    assert (row["docs"], row["bytes"]) == (actual["n"], actual["b"])  # kept in step
    return row["docs"], row["bytes"]


async def test_a_team_indexes_within_its_document_and_byte_bounds(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    assert await index(db_pool, team, "a", "x" * 99) is None  # 1 + 99 bytes
    assert await index(db_pool, team, "b", "é" * 50) is None  # 1 + 100 bytes: bytes, not characters
    assert await index(db_pool, team, "c", "x" * 60) == "team_index_full"  # 201 + 61 > 250
    assert await usage(db_pool, team) == (2, 201)
    assert await index(db_pool, team, "a", "x" * 9) is None  # a replace frees the old size
    assert await usage(db_pool, team) == (2, 111)
    assert await index(db_pool, team, "c", "x" * 9) is None
    assert await index(db_pool, team, "d", "x") == "team_document_limit"
    assert await index(db_pool, team, "c", "x" * 19) is None  # replacing never counts as a new document
    assert await usage(db_pool, team) == (3, 131)
    other = f"t_{uuid.uuid4().hex[:10]}"  # bounds are per team
    assert await index(db_pool, other, "d", "x") is None


async def test_a_refused_replace_keeps_the_old_document(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    assert await index(db_pool, team, "keep", "old") is None
    assert await index(db_pool, team, "filler", "y" * 200) is None
    assert await index(db_pool, team, "keep", "n" * 100) == "team_index_full"
    body = await db_pool.fetchval(
        "SELECT body FROM search_documents WHERE team_id = $1 AND doc_id = 'keep'", team)
    assert body == "old"
    assert await usage(db_pool, team) == (2, 205)


async def test_concurrent_indexers_cannot_overrun_the_team_bounds(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    codes = await asyncio.gather(*(index(db_pool, team, f"d{i}", "x" * 99) for i in range(8)))
    assert sorted(str(c) for c in codes) == ["None", "None"] + ["team_index_full"] * 6
    assert await usage(db_pool, team) == (2, 200)
