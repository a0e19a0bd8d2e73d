"""Lifecycle benchmark (run by hand: python bench/lifecycle.py).

1. Added latency of an idempotent call vs a plain one (math, one client, p50/p99).
2. Event overhead: a call's journal entry with its three events vs without them (p50/p99 of
   the durable publish), and the events' share of the writer's batch cost.
3. Events per second served by GET /v1/events/stream to 20 SSE subscribers of one team.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.records.calls import CallRecord  # noqa: E402
from proxy.config import Settings  # noqa: E402
from infra.db import create_pool  # noqa: E402
from proxy.records.events import event  # noqa: E402
from proxy.records.journal import Journal  # noqa: E402
from proxy.metrics import Metrics  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from proxy.records.usage import UsageRecord  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def idempotent_vs_plain(url: str, headers: dict[str, str], n: int) -> list[str]:
    out = []
    async with aiohttp.ClientSession(headers=headers) as s:
        for label, keyed in (("plain", False), ("idempotent", True), ("plain", False), ("idempotent", True)):
            lat = []
            for i in range(n):
                body = {"tool": "math", "args": {"expr": f"{i}+1"},  # the seed's envelope
                        "context": {"team_id": TEAM, "agent_run_id": f"run-{i % 16}"}}
                if keyed:
                    body["idempotency_key"] = uuid.uuid4().hex
                t = time.perf_counter()
                async with s.post(f"{url}/v1/tools/invoke", json=body) as r:
                    await r.read()
                    assert r.status == 200, r.status
                lat.append((time.perf_counter() - t) * 1000)
            out.append((label, pct(lat, .5), pct(lat, .99)))
    plain = [o for o in out if o[0] == "plain"][-1]
    idem = [o for o in out if o[0] == "idempotent"][-1]
    return [f"  plain       p50 {plain[1]:6.2f} ms   p99 {plain[2]:6.2f} ms",
            f"  idempotent  p50 {idem[1]:6.2f} ms   p99 {idem[2]:6.2f} ms",
            f"  added by the key: p50 {idem[1] - plain[1]:+.2f} ms   p99 {idem[2] - plain[2]:+.2f} ms"]


def records(team: str, with_events: bool) -> dict:
    now = datetime.now(timezone.utc)
    cid = str(uuid.uuid4())
    usage = UsageRecord(call_id=cid, result_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()),
                        team_id=team, agent_id="a", agent_run_id=None, tool="math", category="A",
                        action="read", decision="allow", status="COMPLETED", error_code=None,
                        http_status=200, latency_ms=1.0, started_at=now, finished_at=now)
    call = CallRecord(call_id=cid, team_id=team, agent_id="a", agent_run_id=None, tool="math",
                      status="COMPLETED", http_status=200, response={"ok": True, "output": {"value": 2}},
                      created_at=now, finished_at=now)
    evs = [event(team, t, call_id=cid, payload={"tool": "math"}) for t in
           ("agent.tool.requested", "agent.tool.started", "agent.tool.completed")] if with_events else []
    return {"usage": usage, "call": call, "events": evs}


async def event_overhead(stack, n: int) -> list[str]:
    stack.child("proxy").stop()  # measure the publish alone
    nc = await nats.connect(stack.nats_url)
    pool = await create_pool(stack.database_url)
    journal = Journal(nc, pool, Metrics())
    out = []
    for with_events in (False, True):
        lat = []
        for _ in range(n):
            r = records("bench-ev", with_events)
            t = time.perf_counter()
            await journal.record(**r)
            lat.append((time.perf_counter() - t) * 1e6)
        label = "with 3 events " if with_events else "without events"
        out.append(f"  journal publish {label}  p50 {pct(lat, .5):6.0f} µs   p99 {pct(lat, .99):6.0f} µs")
    await nc.close()
    await pool.close()
    return out


async def sse_fanout(url: str, token: str, journal: Journal, subscribers: int, n: int) -> str:
    team = "sse-bench"  # a team of its own: only the events published below
    got = [0] * subscribers
    done = asyncio.Event()

    async def subscriber(i: int, session: aiohttp.ClientSession) -> None:
        async with session.get(f"{url}/v1/events/stream", headers={"Authorization": f"Bearer {token}"}) as r:
            async for line in r.content:
                if line.startswith(b"id: "):
                    got[i] += 1
                    if all(g >= n for g in got):
                        done.set()
                    if got[i] >= n:
                        return

    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(subscriber(i, session)) for i in range(subscribers)]
        await asyncio.sleep(1.0)
        t0 = time.perf_counter()
        for _ in range(n // 50):
            await journal.record(events=[event(team, "agent.plan.updated", run_id="r", payload={"i": 1})
                                         for _ in range(50)])
        await asyncio.wait_for(done.wait(), 120)
        elapsed = time.perf_counter() - t0
        for t in tasks:
            t.cancel()
    return (f"  {subscribers} subscribers x {n} events in {elapsed:.2f} s: {n / elapsed:,.0f} events/s per "
            f"subscriber, {subscribers * n / elapsed:,.0f} events/s served (written, numbered, streamed)")


async def main(n: int, events: int) -> None:
    stack = bench_stack(min(4, os.cpu_count() or 1))
    try:
        await stack.start()
        headers = await prepare(stack)
        lat = await idempotent_vs_plain(stack.url, headers, n)
        token = mint(Settings(data_dir=stack.data_dir), agent_id="sse", team_id="sse-bench", ttl_s=3600)
        nc = await nats.connect(stack.nats_url)
        pool = await create_pool(stack.database_url)
        fan = await sse_fanout(stack.url, token, Journal(nc, pool, Metrics()), 20, events)  # own team
        await nc.close()
        await pool.close()
        overhead = await event_overhead(stack, n)
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, loopback\n")
    print(f"idempotency ({n} calls each, one client):")
    print("\n".join(lat))
    print("\nevent overhead per call:")
    print("\n".join(overhead))
    print("\nSSE:")
    print(fan)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--events", type=int, default=2000)
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a.calls, a.events))
