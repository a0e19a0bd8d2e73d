"""Postgres goes down in the middle of a burst. With limits in NATS KV, calls keep completing;
with limits in Postgres, they are refused quickly (fail closed, nothing hangs). Either way,
once Postgres is back every completed call has exactly one usage row (the journal waits in
JetStream)."""

from __future__ import annotations

import asyncio
import shutil
import time

import aiohttp
import asyncpg
import pytest

from cli.up import Stack
from proxy.config import Settings
from infra.embedded.ports import free_port
from proxy.identity.tokens import mint
from tests.support.infra import scratch_dir


@pytest.mark.parametrize("store", ["nats", "postgres"])
async def test_postgres_outage_during_a_burst_loses_no_usage(store: str) -> None:
    root = scratch_dir("toolproxy-outage-")
    # A stack of its own: stopping this Postgres touches nothing else in the session.
    stack = Stack(root / "data", free_port(), workers=1, quiet=True,
                  env={"TOOLPROXY_LOG_LEVEL": "warning", "TOOLPROXY_LIMITS_STORE": store})
    try:
        await stack.start()
        settings = Settings(data_dir=stack.data_dir)
        completed: list[str] = []
        other: list[tuple[int, str]] = []
        refused: list[str] = []
        spans: list[tuple[float, float]] = []  # each call's start and end (monotonic)

        async def caller(session: aiohttp.ClientSession, agent: str, n: int) -> None:
            # One agent per caller, well inside category A's 600/min per agent and tool.
            token = mint(settings, agent_id=agent, team_id="outage", ttl_s=600)
            headers = {"Authorization": f"Bearer {token}"}
            for i in range(n):
                body = {"tool": "math", "args": {"expr": f"{i}*2"}}
                t0 = time.monotonic()
                async with session.post(f"{stack.url}/v1/tools/invoke", json=body, headers=headers) as r:
                    data = await r.json()
                    if r.status == 200:
                        completed.append(data["call_id"])
                    else:
                        other.append((r.status, data["error"]["code"]))
                        refused.append(data["call_id"])
                spans.append((t0, time.monotonic()))
                await asyncio.sleep(0.01)

        async with aiohttp.ClientSession() as session:
            burst = asyncio.gather(*(caller(session, f"agent-{k}", 50) for k in range(4)))
            await asyncio.sleep(0.3)
            stack.stop_postgres()
            stopped = time.monotonic()
            during = len(completed)
            await asyncio.sleep(3.0)
            completed_while_down = len(completed) - during
            back = time.monotonic()
            await stack.start_postgres()
            await burst

        # Nothing hangs until Postgres returns: every call ends on its own timeout (the limits'
        # store waits 1 s at most) or sooner, so no call spans the whole 3 s outage. (A bound on
        # each call's duration would be a timing goal a loaded machine breaks; this is not.)
        hung = [(t0, t1) for t0, t1 in spans if t0 <= stopped and t1 >= back]
        assert not hung, f"{len(hung)} calls waited out the outage"
        if store == "nats":
            assert completed_while_down > 0  # calls went on while Postgres was down
            assert len(completed) == 200, other
        else:
            assert other and set(other) == {(503, "limits_unavailable")}
            assert len(completed) + len(other) == 200
        conn = await asyncpg.connect(stack.database_url)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while True:
                rows = await conn.fetch(
                    "SELECT call_id, status FROM usage_records WHERE team_id = 'outage'")
                if len(rows) >= 200 or loop.time() > deadline:
                    break
                await asyncio.sleep(0.2)
            ids = [str(r["call_id"]) for r in rows]
            assert len(ids) == len(set(ids))  # no duplicates
            done = sorted(str(r["call_id"]) for r in rows if r["status"] == "COMPLETED")
            assert done == sorted(completed)  # every completed call, exactly once
            assert sorted(ids) == sorted(completed + refused)  # and every refused one
            rollup = await conn.fetchval(
                "SELECT sum(completed) FROM usage_daily WHERE team_id = 'outage'")
            assert rollup == len(completed)
        finally:
            await conn.close()
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)
