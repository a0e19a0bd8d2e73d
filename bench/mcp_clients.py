"""Benchmark: real MCP client libraries against /mcp, beside the native route, in one run on one
stack (`toolproxy up`, one worker).

1. `tools/call` of `math` (a new expression every call), one connection, N calls in sequence:
   p50/p99 per client — the official TypeScript SDK (2025-11-25, Node 22 from the cache of
   tests/support/npm/install.sh), the Python `mcp` SDK (2026-07-28) — and the native
   `POST /v1/tools/invoke` with one aiohttp connection.
2. A held call as a task: the time from a governance decision (its `POST .../decision`
   answered) to the waiting client seeing the task completed with the tool's result — the
   TypeScript SDK (2025-11-25 task augmentation, polling every pollInterval) and fastmcp with
   fastmcp-tasks (2026-07-28 extension) — over R rounds.

Run: `python bench/mcp_clients.py [--calls 300] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from tests.support.mcp_clients import NODE, TS_SDK, missing, node_script  # noqa: E402

HELD = "greenfood.order"
HELD_ARGS = {"op": "create_order", "product_id": "apple", "qty": 1}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def line(label: str, times_ms: list[float]) -> str:
    return (f"{label:<44} n={len(times_ms):<4} p50 {pct(times_ms, 50):7.2f} ms   "
            f"p99 {pct(times_ms, 99):7.2f} ms   mean {statistics.fmean(times_ms):7.2f} ms")


async def native(url: str, headers: dict[str, str], n: int) -> list[float]:
    times = []
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn, headers=headers) as s:
        for i in range(n):
            t0 = time.perf_counter()
            async with s.post(f"{url}/v1/tools/invoke", json={"tool": "math", "args": {"expr": f"{i}+1"}}) as r:
                assert r.status == 200, await r.text()
                await r.read()
            times.append((time.perf_counter() - t0) * 1000)
    return times


async def python_sdk(url: str, token: str, n: int) -> list[float]:
    from tests.support.mcp_client import mcp_http

    times = []
    async with mcp_http(f"{url}/mcp", token, "auto") as c:
        for i in range(n):
            t0 = time.perf_counter()
            result = await c.call_tool("math", {"expr": f"{i}+1"})
            times.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error
    return times


async def ts_sdk(url: str, token: str, n: int) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        str(NODE), str(node_script("ts_client.mjs")), "bench", f"{url}/mcp", str(n),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOOLPROXY_TOKEN": token}, cwd=str(NODE.parents[2]))
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    return next(e for e in map(json.loads, out.decode().splitlines()) if e["event"] == "bench")["times"]


async def decide(s: aiohttp.ClientSession, url: str, gov: str, call_id: str) -> float:
    """Approve the call's approval; the time its decision was answered (perf_counter)."""
    async with s.get(f"{url}/v1/approvals", headers={"Authorization": f"Bearer {gov}"}) as r:
        approval = next(a for a in (await r.json())["approvals"] if a["call_id"] == call_id)
    async with s.post(f"{url}/v1/approvals/{approval['approval_id']}/decision",
                      json={"decision": "approve", "reason": "bench"},
                      headers={"Authorization": f"Bearer {gov}"}) as r:
        assert r.status == 200, await r.text()
    return time.perf_counter()


async def ts_task_latency(url: str, token: str, gov: str) -> float:
    """The SDK polls on its own (every pollInterval); the decision is made while it does. Both
    clocks are this machine's wall clock (ms since the epoch)."""
    proc = await asyncio.create_subprocess_exec(
        str(NODE), str(node_script("ts_client.mjs")), "task", f"{url}/mcp",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOOLPROXY_TOKEN": token, "TOOLPROXY_TASK_TOOL": HELD.replace(".", "-"),
             "TOOLPROXY_TASK_ARGS": json.dumps(HELD_ARGS), "TOOLPROXY_TASK_NOWAIT": "1"},
        cwd=str(NODE.parents[2]))
    assert proc.stdout is not None
    task_id = None
    while task_id is None:
        raw = await proc.stdout.readline()
        assert raw, (await proc.stderr.read()).decode()[-2000:]  # type: ignore[union-attr]
        event = json.loads(raw)
        assert event["event"] != "error", event
        if event["event"] == "taskCreated":
            task_id = event["taskId"]
    await asyncio.sleep(0.3)
    async with aiohttp.ClientSession() as s:
        await decide(s, url, gov, task_id)
    decided_at = time.time() * 1000
    result_at = None
    while result_at is None:
        raw = await proc.stdout.readline()
        assert raw, (await proc.stderr.read()).decode()[-2000:]  # type: ignore[union-attr]
        event = json.loads(raw)
        if event["event"] == "result":
            assert not event["result"].get("isError"), event
            result_at = event["at"]
        elif event["event"] == "error":
            raise AssertionError(event)
    await proc.wait()
    return float(result_at - decided_at)


async def fastmcp_task_latency(url: str, token: str, gov: str) -> float:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from fastmcp_tasks.client import call_tool_task

    transport = StreamableHttpTransport(f"{url}/mcp", headers={"Authorization": f"Bearer {token}"})
    async with Client(transport) as c, aiohttp.ClientSession() as s:
        task = await call_tool_task(c, HELD.replace(".", "-"), HELD_ARGS)
        waiting = asyncio.create_task(task.result())  # polls (pollIntervalMs) from now on
        await asyncio.sleep(0.3)
        decided = await decide(s, url, gov, task.task_id)
        result = await waiting
        done = time.perf_counter()
        assert not result.is_error, result
    return (done - decided) * 1000


async def main(calls: int, rounds: int) -> None:
    stack = bench_stack(1)
    try:
        await stack.start()
        headers = await prepare(stack, ("math", HELD))
        token = headers["Authorization"].removeprefix("Bearer ")
        settings = Settings(data_dir=stack.data_dir)
        admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
        gov = mint(settings, agent_id="bench-gov", team_id=TEAM, role="governance", ttl_s=3600)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            async with s.post(f"{stack.url}/v1/admin/grants", json={
                    "team_id": TEAM, "capability": f"tool.{HELD}.invoke"}) as r:
                assert r.status in (200, 201), await r.text()
        await asyncio.sleep(0.5)
        ts_missing = missing(NODE, TS_SDK)
        print(f"\ntools/call of math, 1 connection, {calls} calls in sequence (same stack, same run):")
        await native(stack.url, headers, 20)  # warm-up
        rows = [("native POST /v1/tools/invoke", await native(stack.url, headers, calls)),
                ("Python mcp SDK 2.3 (/mcp 2026-07-28)", await python_sdk(stack.url, token, calls))]
        if ts_missing is None:
            rows.append(("TypeScript SDK 1.32 (/mcp 2025-11-25)", await ts_sdk(stack.url, token, calls)))
        rows.append(("native POST /v1/tools/invoke (again)", await native(stack.url, headers, calls)))
        base = pct(rows[0][1], 50)
        for label, times in rows:
            print(line(label, times) + f"   p50 x{pct(times, 50) / base:5.2f} native")
        if ts_missing is not None:
            print(f"  (TypeScript SDK skipped: {ts_missing})")
        print(f"\nheld call ({HELD}) as a task: governance decision answered -> client sees the result, "
              f"{rounds} rounds:")
        waits = {"fastmcp + fastmcp-tasks (2026-07-28)": [await fastmcp_task_latency(stack.url, token, gov)
                                                          for _ in range(rounds)]}
        if ts_missing is None:
            waits["TypeScript SDK (2025-11-25)"] = [await ts_task_latency(stack.url, token, gov)
                                                    for _ in range(rounds)]
        for label, ms in waits.items():
            print(f"{label:<44} median {statistics.median(ms):7.1f} ms   max {max(ms):7.1f} ms   "
                  f"(poll interval 500 ms)")
    finally:
        remove(stack)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    asyncio.run(main(a.calls, a.rounds))
