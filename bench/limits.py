"""Benchmark for limits and usage (run by hand: python bench/limits.py).

1. The cost of one rate-limit check with the shared store, p50/p99 (µs), and the alternative
   considered: the same GCRA as one Postgres function call per check.
2. The whole pipeline (math, 32 clients, distinct args) with limits and the usage/decision
   journal on, and with both replaced by nothing (bench/without.py, BENCH_WITHOUT=limits,journal).
3. Usage rows written per second by the journal writer (entries published to JetStream, then
   drained into Postgres in batches).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import nats
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import Result, run  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from cli.up import Stack  # noqa: E402
from infra.db import create_pool  # noqa: E402
from proxy.records.entry import Entry, dumps
from proxy.records.journal import Journal
from proxy.core.limits.nats_store import NatsLimiter  # noqa: E402
from proxy.core.limits.pg_store import PostgresLimiter  # noqa: E402
from proxy.metrics import Metrics  # noqa: E402
from proxy.records.usage import UsageRecord  # noqa: E402

def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def check_cost(stack: Stack, n: int) -> list[str]:
    """Each store's full admission (both buckets and the daily counter), sequentially."""
    out = []
    nc = await nats.connect(stack.nats_url)
    pool = await create_pool(stack.database_url)
    high = {c: 1e9 for c in "ABCD"}
    stores = {
        "postgres": PostgresLimiter(pool, lambda team, agent: None, team_per_minute=high),
        "nats": NatsLimiter(nc, lambda team, agent: None, team_per_minute=high),
    }
    for name, limiter in stores.items():
        await limiter.start()
        for label, agents in (("one agent+tool", 1), ("200 agents round-robin", 200)):
            lat = []
            for i in range(n):
                t = time.perf_counter()
                a = await limiter.admit(team_id="bench", agent_id=f"a{i % agents}", tool="math",
                                        category="A", rate={"per_minute": 1e9})
                lat.append((time.perf_counter() - t) * 1e6)
                assert a.allowed
            out.append(f"  {name:<9} {label:<24} p50 {pct(lat, .5):6.0f} µs   p99 {pct(lat, .99):6.0f} µs")
        await limiter.close()
    await pool.close()
    await nc.close()
    return out


async def usage_rows_per_second(stack: Stack, n: int) -> str:
    stack.child("proxy").stop()  # its own journal writer would drain the stream first
    nc = await nats.connect(stack.nats_url)
    js = nc.jetstream()
    now = datetime.now(timezone.utc)
    for i in range(n):
        rec = UsageRecord(call_id=str(uuid.uuid4()), result_id=str(uuid.uuid4()),
                          decision_id=str(uuid.uuid4()), team_id="rows", agent_id=f"a{i % 50}",
                          agent_run_id=None, tool="math", category="A", action="read",
                          decision="allow", status="COMPLETED", error_code=None, http_status=200,
                          latency_ms=1.0, cost_1t=0.00002, started_at=now, finished_at=now)
        entry = Entry(usage=rec, key=rec.call_id)
        await js.publish(entry.subject, dumps(entry),  # as the proxy does
                         headers={"Nats-Msg-Id": rec.call_id})
    pool = await create_pool(stack.database_url)
    t0 = time.perf_counter()
    journal = Journal(nc, pool, Metrics())
    await journal.start()
    while await pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = 'rows'") < n:
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - t0
    await journal.close()
    await pool.close()
    await nc.close()
    return f"  {n} usage rows (with rollups) drained into Postgres in {elapsed:.2f} s: {n / elapsed:,.0f} rows/s"


async def _invoke_load(label: str, url: str, headers: dict[str, str], concurrency: int,
                       seconds: float) -> Result:
    """`math` with the seed's envelope (team_id, agent_run_id), a new expression per call."""
    counter = itertools.count()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def call() -> bool:
            n = next(counter)
            body = orjson.dumps({"tool": "math", "args": {"expr": f"{n}+3*4"},
                                 "context": {"team_id": TEAM, "agent_run_id": f"run-{n % 16}"}})
            async with s.post(url, data=body, headers=headers) as r:
                await r.read()
                return r.status == 200
        return await run(label, call, concurrency=concurrency, seconds=seconds)


async def pipeline(seconds: float, disable: str, concurrency: int, store: str = "postgres") -> Result:
    extra = {"command": "bench.without", "BENCH_WITHOUT": disable} if disable else {}
    stack = bench_stack(min(4, os.cpu_count() or 1), TOOLPROXY_LIMITS_STORE=store, **extra)
    try:
        await stack.start()
        headers = await prepare(stack)  # limits high: the bench measures the check, not refusals
        label = f"limits ({store}) + journal ON" if not disable else f"{disable} OFF"
        return await _invoke_load(f"pipeline, {label}, c={concurrency}", f"{stack.url}/v1/tools/invoke",
                                  headers, concurrency, seconds)
    finally:
        remove(stack)


async def main(seconds: float, n: int) -> None:
    stack = bench_stack(1)
    try:
        await stack.start()
        costs = await check_cost(stack, n)
        rows = await usage_rows_per_second(stack, 20_000)
    finally:
        remove(stack)
    runs = []
    for c in (32, 1):
        runs.append(await pipeline(seconds, "", c, "postgres"))
        runs.append(await pipeline(seconds, "", c, "nats"))
        runs.append(await pipeline(seconds, "limits,journal", c))
    on, off = runs[0], runs[2]
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, loopback\n")
    print("one admission (two GCRA buckets + the daily invocation counter), sequential:")
    print("\n".join(costs))
    print("\nwhole pipeline, distinct args:")
    for r in runs:
        print("  " + r.line())
    print(f"  cost of limits (postgres) + durable usage/decision journal at c=32: "
          f"{(1 - on.rps / off.rps) * 100:.0f}% of throughput")
    print("\nusage writer:")
    print(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--checks", type=int, default=3000)
    a = ap.parse_args()
    try:
        import uvloop  # the proxy runs on uvloop: measure the client side on it too

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a.seconds, a.checks))
