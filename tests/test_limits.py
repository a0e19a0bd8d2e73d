"""Rate limits and quotas across two real proxy processes sharing Postgres and NATS."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest

from proxy.core.limits.gcra import Rate, give_back, take
from proxy.core.limits.pg_store import PostgresLimiter
from tests.support import fixture_services
from tests.support.calls import bearer, invoke
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess
from tests.support.overrides import set_override


# --- the algorithm itself -------------------------------------------------------------------

def test_gcra_burst_then_sustained_rate() -> None:
    rate = Rate(per_minute=60, burst=3)  # one per second, three at once
    tat, now = None, 1000.0
    results = []
    for _ in range(4):
        v = take(rate, tat, now)
        results.append(v.allowed)
        if v.allowed:
            tat = v.tat
    assert results == [True, True, True, False]
    denied = take(rate, tat, now)
    assert denied.retry_after == pytest.approx(1.0)
    assert take(rate, tat, now + 0.99).allowed is False
    assert take(rate, tat, now + 1.0).allowed is True
    assert give_back(rate, tat, now) == pytest.approx(tat - 1.0)


def test_gcra_zero_rate_never_admits() -> None:
    assert take(Rate(per_minute=0, burst=1), None, 0.0).allowed is False


async def test_the_postgres_store_computes_with_the_time_it_runs_at(db_pool, team) -> None:
    """A call whose time was read before another's (its round trip, a wait for the bucket's
    lock) is taken at the time the function runs, not at that older time: the fifth token of
    five is there for it. The burst still holds: a sixth is refused."""
    limiter = PostgresLimiter(db_pool, lambda team_id, agent_id: None)
    rate = {"per_minute": 60, "burst": 5}  # one a second

    async def admit(now: float) -> bool:
        got = await limiter.admit(team_id=team, agent_id="a", tool="math", category="A",
                                  rate=rate, now=now)
        return got.allowed

    now = time.time()
    assert [await admit(now) for _ in range(4)] == [True] * 4
    assert await admit(now - 0.5)  # read half a second before the others'
    assert not await admit(time.time())


# --- two replicas ---------------------------------------------------------------------------

@pytest.fixture(params=["postgres", "nats"])
async def replicas(request, database_url, nats_url, builtin) -> AsyncIterator[list[ProxyProcess]]:
    """Two replicas sharing one limits store (each store in turn)."""
    procs = [ProxyProcess(database_url, nats_url, TEST_SECRET, TOOLPROXY_LIMITS_STORE=request.param)
             for _ in range(2)]
    try:
        await asyncio.gather(*(p.start() for p in procs))
        yield procs
    finally:
        for p in procs:
            p.stop()


async def call(session: aiohttp.ClientSession, url: str, tok: str, tool: str, args: dict) -> tuple[int, dict, dict]:
    async with session.post(f"{url}/v1/tools/invoke", json={"tool": tool, "args": args},
                            headers=bearer(tok)) as r:
        return r.status, await r.json(), dict(r.headers)


async def test_rate_limit_holds_across_two_replicas(client, token, team, replicas) -> None:
    await set_override(client, token, team, "ag", "math", 60)  # 1/s, burst 6
    await asyncio.sleep(0.5)  # both replicas reload the override
    tok = token(agent="ag", team=team)
    async with aiohttp.ClientSession() as s:
        t0 = time.monotonic()
        results = await asyncio.gather(*(
            call(s, replicas[i % 2].url, tok, "math", {"expr": f"{i}+1"}) for i in range(40)))
        elapsed = time.monotonic() - t0
    admitted = [r for r in results if r[0] == 200]
    limited = [r for r in results if r[0] == 429]
    assert len(admitted) + len(limited) == 40, [r[0] for r in results]
    burst = 6
    assert burst <= len(admitted) <= burst + math.ceil(elapsed) + 1, (len(admitted), elapsed)
    # Two limiters each keeping their own state would have admitted a burst each.
    assert elapsed < 3 and len(admitted) < 2 * burst
    status, body, headers = limited[0]
    assert body["status"] == "DENIED" and body["error"]["code"] == "rate_limited"
    assert body["error"]["reasons"] == ["agent_tool_rate"]
    assert int(headers["Retry-After"]) >= 1


async def test_retry_after_is_honest(client, token, team) -> None:
    await set_override(client, token, team, "ag", "math", 60)  # 1/s, burst 6
    await asyncio.sleep(0.2)
    tok = token(agent="ag", team=team)
    statuses = [(await invoke(client, tok, "math", {"expr": "1"}))[0] for _ in range(7)]
    assert statuses == [200] * 6 + [429]
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}}, headers=bearer(tok))
    body = await r.json()
    wait = body["error"]["retry_after_s"]
    assert 0 < wait <= 1.0 and r.headers["Retry-After"] == "1"
    await asyncio.sleep(wait + 0.02)
    assert (await invoke(client, tok, "math", {"expr": "1"}))[0] == 200
    # Rate-limited calls are refused before forwarding, and accounted as denied.
    assert (await invoke(client, tok, "math", {"expr": "1"}))[0] == 429


async def test_team_quota_boundary_is_exact_across_replicas(client, token, team, replicas) -> None:
    admin = bearer(token(agent="root", team="ops", role="admin"))
    r = await client.post("/v1/admin/quotas", headers=admin, json={"team_id": team, "invocations": 5})
    assert r.status == 201
    await asyncio.sleep(0.5)
    async with aiohttp.ClientSession() as s:
        results = await asyncio.gather(*(
            call(s, replicas[i % 2].url, token(agent=f"a{i}", team=team), "math", {"expr": "1"})
            for i in range(9)))
    statuses = sorted(r[0] for r in results)
    assert statuses == [200] * 5 + [429] * 4
    refused = next(r for r in results if r[0] == 429)
    assert refused[1]["error"]["code"] == "quota_exceeded"
    assert refused[1]["error"]["reasons"] == ["quota_invocations"]
    assert 0 < int(refused[2]["Retry-After"]) <= 86_400  # until the next UTC midnight
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{replicas[1].url}/v1/admin/quotas", params={"team_id": team}, headers=admin) as r:
            listed = await r.json()
    assert listed["quotas"][0]["used_today"]["invocations"] == 5
    assert listed["quotas"][0]["remaining_today"]["invocations"] == 0
    # Another team is not affected.
    assert (await invoke(client, token(team=f"t_{uuid.uuid4().hex[:8]}"), "math", {"expr": "1"}))[0] == 200


async def test_agent_and_token_quotas(client, token, team) -> None:
    admin = bearer(token(agent="root", team="ops", role="admin"))
    await client.post("/v1/admin/quotas", headers=admin, json={"team_id": team, "agent_id": "a1", "invocations": 2})
    await client.post("/v1/admin/quotas", headers=admin, json={"team_id": team, "tokens": 250})
    gov = bearer(token(agent="gov", team=team, role="governance"))
    await client.post("/v1/admin/grants", headers=admin, json={"team_id": team, "capability": "tool.testsvc.metered.invoke"})
    await asyncio.sleep(0.3)
    a1, a2 = token(agent="a1", team=team), token(agent="a2", team=team)
    assert [(await invoke(client, a1, "math", {"expr": "1"}))[0] for _ in range(3)] == [200, 200, 429]
    assert (await invoke(client, a2, "math", {"expr": "1"}))[0] == 200  # the agent quota is a1's
    # Tokens: checked before each call against what was used so far (100 per call).
    statuses = []
    for _ in range(4):
        statuses.append((await invoke(client, a2, "testsvc.metered", {"tokens": 100}))[0])
        await asyncio.sleep(0.3)  # metering is added to the counters off the request path
    assert statuses == [200, 200, 200, 429]
    r = await client.get("/v1/admin/quotas", params={"team_id": team}, headers=gov)
    team_row = next(q for q in (await r.json())["quotas"] if q["agent_id"] is None)
    assert team_row["used_today"]["tokens"] == 300


async def test_client_disconnect_cancels_the_call(client, token, team, db_pool) -> None:
    fixture_services.patient_outcomes.clear()
    tok = token(agent="impatient", team=team)
    url = str(client.make_url("/v1/tools/invoke"))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.3)) as s:
        with pytest.raises(asyncio.TimeoutError):
            async with s.post(url, json={"tool": "testsvc.patient", "args": {"seconds": 1.5}},
                              headers=bearer(tok)) as r:
                await r.read()
    await asyncio.sleep(0.5)
    assert fixture_services.patient_outcomes == ["cancelled"]  # stopped, not left running
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        row = await db_pool.fetchrow("SELECT status, http_status FROM usage_records WHERE team_id = $1", team)
        if row is not None or loop.time() > deadline:
            break
        await asyncio.sleep(0.05)
    assert row is not None and (row["status"], row["http_status"]) == ("CANCELLED", 499)


async def test_a_quota_set_mid_day_counts_the_day_so_far(client, token, team, db_pool) -> None:
    tok = token(agent="early", team=team)
    for _ in range(3):
        assert (await invoke(client, tok, "math", {"expr": "1"}))[0] == 200
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await db_pool.fetchval("SELECT coalesce(sum(invocations), 0) FROM usage_daily WHERE team_id = $1",
                                 team) < 3 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    admin = bearer(token(agent="root", team="ops", role="admin"))
    r = await client.post("/v1/admin/quotas", headers=admin, json={"team_id": team, "invocations": 4})
    assert r.status == 201
    await asyncio.sleep(0.3)
    assert [(await invoke(client, tok, "math", {"expr": "1"}))[0] for _ in range(2)] == [200, 429]


def test_utc_day_is_the_date_of_any_time_asked_in_any_order() -> None:
    """utc_day keeps the day last asked for: a time on either side of a midnight, or far
    back after a later one, still gets its own date."""
    import random
    from datetime import datetime, timezone

    from proxy.core.limits.limiter import utc_day

    midnight = datetime(2026, 12, 3, tzinfo=timezone.utc).timestamp()
    times = [midnight - 1e-6, midnight, midnight + 86_400 - 1e-6, midnight + 86_400, midnight - 0.5,
             0.0, 4e9, midnight + 1.0] + [random.uniform(0, 4e9) for _ in range(2_000)]
    for t in times:
        assert utc_day(t) == datetime.fromtimestamp(t, timezone.utc).date(), t
