"""How long after a response its call shows in /v1/events and /v1/usage (the journal writer's
lag), while wrk keeps 32 connections of load on the pipeline; the call itself is readable at
once (GET /v1/calls/{id}, checked too). Run by hand: `python bench/visibility.py`."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline import NATIVE_LUA  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402


def background_wrk(url: str, lua: str, headers: dict[str, str], connections: int) -> subprocess.Popen[bytes]:
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(lua)
    script.close()
    argv = ["wrk", "-t", "2", "-c", str(connections), "-d", "600s", "-s", script.name,
            "-H", "Content-Type: application/json"]
    for k, v in headers.items():
        argv += ["-H", f"{k}: {v}"]
    return subprocess.Popen([*argv, url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def probe(url: str, token: str, team: str, n: int) -> tuple[list[float], list[float], int]:
    """n sequential calls of a team of its own; for each, the time until its completion event
    and its usage row are visible."""
    ev_lag, usage_lag, not_at_once = [], [], 0
    day = datetime.now(timezone.utc).date().isoformat()
    cursor = 0
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as s:
        for i in range(n):
            body = {"tool": "math", "args": {"expr": f"{i}*7"},
                    "context": {"team_id": team, "agent_run_id": "run-probe"}}
            async with s.post(f"{url}/v1/tools/invoke", json=body) as r:
                call = await r.json()
            t0 = time.monotonic()
            async with s.get(f"{url}/v1/calls/{call['call_id']}") as r:
                if (await r.json()).get("status") != "COMPLETED":
                    not_at_once += 1
            seen_event = seen_usage = None
            while seen_event is None or seen_usage is None:
                if seen_event is None:
                    async with s.get(f"{url}/v1/events", params={"cursor": str(cursor), "limit": "100"}) as r:
                        page = await r.json()
                    for e in page["events"]:
                        cursor = max(cursor, e["sequence"])
                        if e["call_id"] == call["call_id"] and e["type"] == "agent.tool.completed":
                            seen_event = time.monotonic() - t0
                if seen_usage is None:
                    async with s.get(f"{url}/v1/usage", params={"day": day}) as r:
                        if (await r.json())["totals"]["calls"] >= i + 1:
                            seen_usage = time.monotonic() - t0
                if time.monotonic() - t0 > 30:
                    break
                await asyncio.sleep(0.005)
            ev_lag.append(seen_event if seen_event is not None else 30.0)
            usage_lag.append(seen_usage if seen_usage is not None else 30.0)
    return ev_lag, usage_lag, not_at_once


async def main(calls: int, workers: int) -> None:
    stack = bench_stack(workers)
    try:
        await stack.start()
        headers = await prepare(stack)
        auth = {"Authorization": headers["Authorization"]}
        token = mint(Settings(data_dir=stack.data_dir), agent_id="probe", team_id="probe-team", ttl_s=3600)
        lua = NATIVE_LUA.replace("TEAM", TEAM)
        load = background_wrk(stack.url, lua, auth, 32)
        try:
            await asyncio.sleep(2.0)
            ev, usage, late = await probe(stack.url, token, "probe-team", calls)
        finally:
            load.terminate()
            load.wait(10)
    finally:
        remove(stack)
    print(f"\n{calls} probe calls under 32 connections of load ({workers} proxy workers)")
    print(f"  GET /v1/calls/{{id}} right after the response: COMPLETED {calls - late}/{calls}")
    for name, xs in (("event agent.tool.completed in /v1/events", ev), ("usage row in /v1/usage", usage)):
        print(f"  {name:<42} p50 {statistics.median(xs) * 1000:7.1f} ms   p99 {pct(xs, 0.99) * 1000:7.1f} ms"
              f"   max {max(xs) * 1000:7.1f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    asyncio.run(main(a.calls, a.workers))
