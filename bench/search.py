"""Benchmark: search.lite over 100,000 documents of one team (run by hand: python bench/search.py).

1. Indexes N documents (default 100,000; synthetic text, Zipf-distributed words) with
   search.index's own upsert statement, in batches, and prints the rate and the sizes of the
   table, its tsvector GIN index and the whole relation.
2. For queries of different selectivity, p50/p99 of search.lite's SQL run directly (asyncpg,
   one connection) and of search.lite through the proxy at 1 client (the seed's envelope:
   `context` with `team_id` and `agent_run_id`), and which index the plan uses.

Everything runs on this machine on loopback: embedded Postgres and NATS, the services and
proxy processes, and this load generator.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import random
import sys
import time
from pathlib import Path

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from services.search.store import SEARCH, UPSERT  # noqa: E402

VOCABULARY = 40_000
WORDS_PER_DOC = 120


def vocabulary(rng: random.Random) -> list[str]:
    """Pronounceable made-up words (no English stop words, stems stay apart)."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        n = rng.choice((2, 3, 3, 4))
        seen.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(seen)


def corpus(n: int, seed: int = 7) -> tuple[list[tuple[str, str, str, list[str]]], list[str]]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    # Zipf: a few words are common, most are rare.
    cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    docs = []
    for i in range(n):
        body = rng.choices(words, cum_weights=cum, k=WORDS_PER_DOC)
        title = rng.choices(words, cum_weights=cum, k=5)
        docs.append((f"doc-{i:06d}", " ".join(title).capitalize(), " ".join(body),
                     [f"t{i % 20}"]))
    return docs, words


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def index(pool: asyncpg.Pool, docs: list[tuple[str, str, str, list[str]]],
                batch: int = 1000) -> float:
    started = time.perf_counter()
    async with pool.acquire() as conn:
        for i in range(0, len(docs), batch):
            rows = [(TEAM, d, t, b, tags, "bench") for d, t, b, tags in docs[i:i + batch]]
            async with conn.transaction():
                await conn.executemany(UPSERT, rows)
            if (i // batch) % 10 == 9:
                print(f"  indexed {i + batch:,} documents", flush=True)
        await conn.execute("ANALYZE search_documents")
    return time.perf_counter() - started


async def sizes(pool: asyncpg.Pool) -> dict[str, str]:
    row = await pool.fetchrow(
        """SELECT pg_size_pretty(pg_relation_size('search_documents')) AS heap,
                  pg_size_pretty(pg_relation_size('search_documents_tsv')) AS gin,
                  pg_size_pretty(pg_relation_size('search_documents_pkey')) AS pkey,
                  pg_size_pretty(pg_total_relation_size('search_documents')) AS total""")
    return dict(row)


async def plan_index(pool: asyncpg.Pool, query: str) -> str:
    lines = [r[0] for r in await pool.fetch(f"EXPLAIN {SEARCH}", TEAM, query, 10, [])]
    for line in lines:
        if "Index Scan on" in line or "Seq Scan on" in line:
            return line.strip().split("  (")[0].removeprefix("->  ")
    return "?"


async def direct(pool: asyncpg.Pool, query: str, n: int) -> tuple[list[float], int]:
    lat, hits = [], 0
    async with pool.acquire() as conn:
        statement = await conn.prepare(SEARCH)
        for _ in range(n):
            t = time.perf_counter()
            rows = await statement.fetch(TEAM, query, 10, [])
            lat.append((time.perf_counter() - t) * 1000)
            hits = len(rows)
    return lat, hits


async def proxied(url: str, headers: dict[str, str], query: str, n: int) -> list[float]:
    lat = []
    body = {"tool": "search.lite", "args": {"query": query, "limit": 10},
            "context": {"team_id": TEAM, "agent_run_id": "ar_bench_search"}}
    async with aiohttp.ClientSession(headers=headers) as s:
        for _ in range(n):
            t = time.perf_counter()
            async with s.post(f"{url}/v1/tools/invoke", json=body) as r:
                data = await r.json()
            lat.append((time.perf_counter() - t) * 1000)
            assert r.status == 200 and data["status"] == "COMPLETED", data
    return lat


async def main(documents: int, n: int, workers: int) -> None:
    stack = bench_stack(workers)
    try:
        await stack.start()
        headers = await prepare(stack, tools=("search.lite",))
        pool = await asyncpg.create_pool(stack.database_url, min_size=1, max_size=2)
        assert pool is not None
        print(f"generating {documents:,} documents of {WORDS_PER_DOC} words…", flush=True)
        docs, words = corpus(documents)
        seconds = await index(pool, docs)
        size = await sizes(pool)
        queries = {
            "rare word": words[30_000],
            "mid-frequency word": words[2_000],
            "two words (AND)": f"{words[300]} {words[400]}",
            "phrase": f'"{docs[123][2].split()[10]} {docs[123][2].split()[11]}"',
            "word OR word": f"{words[20_000]} or {words[25_000]}",
            "common word": words[0],
        }
        rows = []
        for label, q in queries.items():
            await direct(pool, q, 5)  # warm the cache and the plan
            sql_lat, hits = await direct(pool, q, n)
            matches = await pool.fetchval(
                "SELECT count(*) FROM search_documents WHERE team_id = $1"
                " AND tsv @@ websearch_to_tsquery('english', $2)", TEAM, q)
            await proxied(stack.url, headers, q, 5)
            proxy_lat = await proxied(stack.url, headers, q, n)
            rows.append((label, matches, hits, sql_lat, proxy_lat, await plan_index(pool, q)))
        await pool.close()
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"proxy workers: {workers}; {n} sequential queries per row (1 client), limit 10\n")
    print(f"indexed {documents:,} documents in {seconds:.1f} s ({documents / seconds:,.0f} docs/s, "
          f"batches of 1,000 through search.index's upsert)")
    print(f"sizes: table {size['heap']}, tsvector GIN index {size['gin']}, primary key "
          f"{size['pkey']}, total with TOAST {size['total']}\n")
    print(f"{'query':<20} {'matches':>8} {'SQL p50':>9} {'SQL p99':>9} {'proxy p50':>10} "
          f"{'proxy p99':>10}  plan")
    for label, matches, hits, s, p, plan in rows:
        print(f"{label:<20} {matches:>8,} {pct(s, .5):>7.2f}ms {pct(s, .99):>7.2f}ms "
              f"{pct(p, .5):>8.2f}ms {pct(p, .99):>8.2f}ms  {plan}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200, help="per query and per path")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    a = ap.parse_args()
    asyncio.run(main(a.documents, a.queries, a.workers))
