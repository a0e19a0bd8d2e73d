"""Standing approvals through the whole pipeline: a matching call runs without waiting, is
logged with the standing approval's id and counted against it (never past max_calls, across
replicas); expired, exhausted, revoked, another team's or another agent's: the call waits for
a per-call approval. Revocation reaches a second replica (a real process) within 1 s."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone

import aiohttp
import pytest

from proxy.config import Settings
from tests.support.approvals import later, standing
from tests.support.calls import bearer, grant, invoke
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess

pytestmark = pytest.mark.timeout(120)

# What these tests count is the standing approval, not the rate limits: the team's category-D
# ceiling (50 a minute, a burst of 5) leaves one token of slack for the four calls of the
# two-replica test, and one replica's lease may hold a token it does not use (up to LEASE_S).
# (That test found the leases' stale clock: see tests/test_leases.py.)
TEAM_D_PER_MINUTE = 6000.0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"team_rate_per_minute": {
        **settings.team_rate_per_minute, "D": TEAM_D_PER_MINUTE}})

TOOL = "energy.meter.read"


async def meter(db_pool, team: str, readings: int = 3) -> str:
    """An energy meter of this team with hourly readings up to the current hour."""
    meter_id = f"em-{uuid.uuid4().hex[:10]}"
    await db_pool.execute("INSERT INTO platform_meters (meter_id, platform, team_id) VALUES ($1, 'energy', $2)",
                          meter_id, team)
    await db_pool.execute(
        """INSERT INTO platform_readings (meter_id, at, value)
           SELECT $1, date_trunc('hour', now()) - make_interval(hours => i), 1.5 + i
           FROM generate_series(0, $2 - 1) AS i""", meter_id, readings)
    return meter_id


async def reader(client, token, team: str, agent: str = "reader") -> str:
    admin = token(agent="root", team="ops", role="admin")
    await grant(client, token, team, f"tool.{TOOL}.invoke")
    r = await client.post("/v1/admin/overrides", headers=bearer(admin), json={
        "team_id": team, "agent_id": agent, "tool": TOOL, "rate_per_minute": 6000})
    assert r.status == 201
    await asyncio.sleep(0.2)
    return token(agent=agent, team=team)


async def listed(client, tok: str, **params) -> list[dict]:
    r = await client.get("/v1/admin/standing-approvals", params=params, headers=bearer(tok))
    assert r.status == 200, await r.text()
    return (await r.json())["standing_approvals"]


async def revoke(client, tok: str, sid: str) -> tuple[int, dict]:
    r = await client.post(f"/v1/admin/standing-approvals/{sid}/revoke", headers=bearer(tok))
    return r.status, await r.json()


async def decision_of(db_pool, call_id: str, timeout: float = 10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        row = await db_pool.fetchrow(
            "SELECT result, reasons, input FROM decisions WHERE call_id = $1 AND phase = 'call'",
            uuid.UUID(call_id))
        if row is not None or loop.time() > deadline:
            return row
        await asyncio.sleep(0.05)


async def test_a_matching_call_runs_at_once_is_logged_and_counted(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team)
    agent = await reader(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    status, sa = await standing(client, gov, team_id=team, tool=TOOL, args={"meter_id": m},
                                expires_at=later(), max_calls=2, reason="hourly dashboard")
    assert status == 201, sa
    sid = sa["standing_approval_id"]
    assert (sa["state"], sa["used_calls"], sa["remaining_calls"]) == ("active", 0, 2)
    assert sa["created_by"] == f"governance:gov@{team}"
    await asyncio.sleep(0.2)

    status, body = await invoke(client, agent, TOOL, {"meter_id": m})
    assert (status, body["status"]) == (200, "COMPLETED"), body
    assert [r["kwh"] for r in body["output"]["readings"]] == [1.5]  # the latest
    row = await decision_of(db_pool, body["call_id"])
    assert row["result"] == "allow" and "standing_approval" in row["reasons"]
    assert row["input"]["approval"] == {"state": "standing", "args_match": True,
                                        "standing_approval_id": sid}
    assert (await listed(client, gov))[0]["used_calls"] == 1

    # Other arguments: not covered, it waits for a per-call approval.
    other = await meter(db_pool, team)
    status, body = await invoke(client, agent, TOOL, {"meter_id": other})
    assert (status, body["status"]) == (202, "AUTHORIZATION_REQUIRED")
    status, body = await invoke(client, agent, TOOL, {"meter_id": m})
    assert status == 200
    # Exhausted: waits again.
    status, body = await invoke(client, agent, TOOL, {"meter_id": m})
    assert status == 202, body
    [row] = await listed(client, gov)
    assert (row["state"], row["used_calls"], row["remaining_calls"]) == ("exhausted", 2, 0)
    assert await listed(client, gov, state="active") == []


async def test_a_json_schema_constraint(client, token, team, db_pool) -> None:
    m1, m2, m3 = [await meter(db_pool, team, readings=30) for _ in range(3)]
    agent = await reader(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    schema = {"type": "object", "required": ["meter_id", "from"],
              "properties": {"meter_id": {"enum": [m1, m2]}, "from": {"type": "string"}}}
    status, sa = await standing(client, gov, team_id=team, tool=TOOL, args_schema=schema,
                                expires_at=later(), max_calls=10)
    assert status == 201, sa
    await asyncio.sleep(0.2)
    hour = await db_pool.fetchval("SELECT max(at) FROM platform_readings WHERE meter_id = $1", m1)
    since = (hour - timedelta(hours=5, minutes=30)).isoformat()  # the last six readings
    for m in (m1, m2):
        status, body = await invoke(client, agent, TOOL, {"meter_id": m, "from": since})
        assert status == 200, body
        assert len(body["output"]["readings"]) == 6
    assert (await invoke(client, agent, TOOL, {"meter_id": m3, "from": since}))[0] == 202
    assert (await invoke(client, agent, TOOL, {"meter_id": m1}))[0] == 202  # `from` required


async def test_expired_and_revoked_standing_approvals_no_longer_apply(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team)
    agent = await reader(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    _, short = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(1.0), max_calls=5)
    await asyncio.sleep(0.2)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 200
    await asyncio.sleep(1.0)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 202
    assert (await listed(client, gov))[0]["state"] == "expired"

    _, sa = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=5)
    await asyncio.sleep(0.2)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 200
    status, revoked = await revoke(client, gov, sa["standing_approval_id"])
    assert (status, revoked["state"], revoked["revoked_by"]) == (200, "revoked", f"governance:gov@{team}")
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 202  # at once
    status, again = await revoke(client, gov, sa["standing_approval_id"])
    assert (status, again["revoked_at"]) == (200, revoked["revoked_at"])  # revoked once


async def test_who_it_applies_to(client, token, team, db_pool) -> None:
    """Only its team, only its agent when it names one, never its creator's own calls."""
    m = await meter(db_pool, team)
    alice = await reader(client, token, team, agent="alice")
    bob = await reader(client, token, team, agent="bob")
    gov = token(agent="gov", team=team, role="governance")
    _, sa = await standing(client, gov, team_id=team, agent_id="alice", tool=TOOL,
                           expires_at=later(), max_calls=5)
    await asyncio.sleep(0.2)
    assert (await invoke(client, alice, TOOL, {"meter_id": m}))[0] == 200
    assert (await invoke(client, bob, TOOL, {"meter_id": m}))[0] == 202

    # Another team's: never applies to this team's calls, even for the same tool.
    other = f"t_{uuid.uuid4().hex[:10]}"
    their_meter = await meter(db_pool, other)
    theirs = await reader(client, token, other, agent="alice")
    assert (await invoke(client, theirs, TOOL, {"meter_id": their_meter}))[0] == 202

    # Team-wide, made by a governance identity: not for that identity's own calls.
    await reader(client, token, team, agent="gov")
    _, wide = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=5)
    await asyncio.sleep(0.2)
    assert (await invoke(client, bob, TOOL, {"meter_id": m}))[0] == 200
    assert (await invoke(client, gov, TOOL, {"meter_id": m}))[0] == 202


async def test_a_call_that_never_ran_gives_its_count_back(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team)
    gov = token(agent="gov", team=team, role="governance")
    agent = token(agent="reader", team=team)  # no grant yet: the policy denies
    _, sa = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=1)
    await asyncio.sleep(0.2)
    status, body = await invoke(client, agent, TOOL, {"meter_id": m})
    assert (status, body["error"]["reasons"]) == (403, ["grant_required"])
    for _ in range(100):
        if (await listed(client, gov))[0]["used_calls"] == 0:
            break
        await asyncio.sleep(0.02)
    assert (await listed(client, gov))[0]["used_calls"] == 0
    agent = await reader(client, token, team)
    await asyncio.sleep(0.3)  # the refund revived it: every replica reloads (NOTIFY)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 200
    assert (await listed(client, gov))[0]["used_calls"] == 1


async def test_governance_only_for_its_own_team_agents_never(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    agent = token(agent="reader", team=team)
    body = {"team_id": team, "tool": TOOL, "expires_at": later(), "max_calls": 3}
    assert (await standing(client, agent, **body))[0] == 403
    r = await client.get("/v1/admin/standing-approvals", headers=bearer(agent))
    assert r.status == 403
    other_gov = token(agent="gov", team="elsewhere", role="governance")
    assert (await standing(client, other_gov, **body))[0] == 403
    status, sa = await standing(client, gov, **body)
    assert status == 201
    sid = sa["standing_approval_id"]
    r = await client.get("/v1/admin/standing-approvals", params={"team_id": team}, headers=bearer(other_gov))
    assert r.status == 403
    assert await listed(client, other_gov) == []
    assert (await revoke(client, other_gov, sid))[0] == 404
    assert (await revoke(client, agent, sid))[0] == 403
    assert (await revoke(client, gov, str(uuid.uuid4())))[0] == 404
    assert (await revoke(client, gov, "not-a-uuid"))[0] == 404
    # No self-authorization: not for the governance identity's own agent id.
    status, err = await standing(client, gov, **{**body, "agent_id": "gov"})
    assert (status, err["error"]["code"]) == (403, "forbidden")
    admin = token(agent="root", team="ops", role="admin")
    assert (await revoke(client, admin, sid))[0] == 200


@pytest.mark.parametrize(("change", "code", "status"), [
    ({"max_calls": 0}, "invalid_request", 400),
    ({"max_calls": 10_000_001}, "invalid_request", 400),
    ({"expires_at": "2001-01-01T00:00:00Z"}, "invalid_request", 400),
    ({"expires_at": "2999-01-01T00:00:00Z"}, "invalid_request", 400),
    ({"expires_at": "2030-01-01T00:00:00"}, "invalid_request", 400),
    ({"tool": "math"}, "invalid_request", 400),
    ({"tool": "no.such.tool"}, "unknown_tool", 404),
    ({"tool": "Bad Name"}, "invalid_request", 400),
    ({"args": {"meter_id": "a\u0000b"}}, "invalid_request", 400),
    ({"args": {"n": 1 << 64}}, "invalid_request", 400),
    ({"args": {"x": "y" * 5000}}, "invalid_request", 400),
    ({"args_schema": {"type": 12}}, "invalid_request", 400),
    ({"args_schema": {"$ref": "https://example.org/s.json"}}, "invalid_request", 400),
    ({"args_schema": {"properties": {"a": {"const": "\u0000"}}}}, "invalid_request", 400),
    ({"reason": "\u0000"}, "invalid_request", 400),
    ({"surprise": 1}, "invalid_request", 400),
    ({"team_id": "bad team"}, "invalid_request", 400),
])
async def test_bad_standing_approvals_are_refused(client, token, team, change, code, status) -> None:
    gov = token(agent="gov", team=team, role="governance")
    body = {"team_id": team, "tool": TOOL, "expires_at": later(), "max_calls": 3, **change}
    got, err = await standing(client, gov, **body)
    assert (got, err["error"]["code"]) == (status, code), err
    assert await listed(client, gov) == []


async def test_never_more_calls_than_the_max_across_replicas_and_revocation_within_a_second(
        client, token, team, db_pool, database_url, nats_url) -> None:
    """Two replicas (this test's app and a `toolproxy serve` process) share one standing
    approval: concurrent calls on both never exceed max_calls; a revocation on one is
    enforced on the other within a second."""
    m = await meter(db_pool, team)
    agent = await reader(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    replica = ProxyProcess(database_url, nats_url, TEST_SECRET,
                           TOOLPROXY_TEAM_RATE_PER_MINUTE=f'{{"D": {TEAM_D_PER_MINUTE}}}')
    await replica.start()
    bodies: list[str] = []  # replica b's answers but its 202s: for the failure message
    try:
        async with aiohttp.ClientSession() as s:
            async def on_b(args: dict) -> int:
                async with s.post(f"{replica.url}/v1/tools/invoke", headers=bearer(agent),
                                  json={"tool": TOOL, "args": args}) as r:
                    if r.status != 202:
                        bodies.append(f"{r.status} {(await r.text())[:300]}")
                    return r.status

            for _ in range(100):  # the replica's catalog knows the tool
                if await on_b({"meter_id": m}) == 202:
                    break
                await asyncio.sleep(0.1)
            _, sa = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=4)
            await asyncio.sleep(0.3)
            calls = [invoke(client, agent, TOOL, {"meter_id": m}) for _ in range(5)]
            statuses = await asyncio.gather(*calls, *(on_b({"meter_id": m}) for _ in range(5)))
            codes = [x[0] if isinstance(x, tuple) else x for x in statuses]
            assert sorted(codes) == [200] * 4 + [202] * 6, (codes, statuses, bodies)
            [row] = await listed(client, gov)
            assert (row["used_calls"], row["state"]) == (4, "exhausted")

            _, sa = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=1000)
            loop = asyncio.get_running_loop()
            made = loop.time()
            # Created on A, applied on B once B's cache has it (NOTIFY: milliseconds; the bound
            # here is generous, for a busy machine — the 1 s promise is about revocation).
            while await on_b({"meter_id": m}) != 200:
                assert loop.time() - made < 5.0, "standing approval not applied on replica b within 5 s"
                await asyncio.sleep(0.01)
            assert (await revoke(client, gov, sa["standing_approval_id"]))[0] == 200
            revoked = loop.time()
            while await on_b({"meter_id": m}) != 202:
                assert loop.time() - revoked < 1.0, "revocation not enforced on replica b within 1 s"
                await asyncio.sleep(0.01)
    finally:
        replica.stop()


async def test_the_standing_approvals_command(client, token, team, db_pool) -> None:
    from tests.support.cli_command import cli

    url = str(client.make_url("")).rstrip("/")
    m = await meter(db_pool, team)
    agent = await reader(client, token, team)
    code, out, err = await cli("standing-approvals", "add", "--team", team, "--tool", TOOL,
                               "--args", f'{{"meter_id": "{m}"}}', "--max-calls", "2",
                               "--expires-in", "10m", "--url", url)
    assert code == 0, err
    sid = out.split()[0]
    assert "active" in out and "0/2 calls" in out
    await asyncio.sleep(0.2)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 200
    code, out, err = await cli("standing-approvals", "list", "--team", team, "--url", url)
    assert code == 0 and sid in out and "1/2 calls" in out, (out, err)
    code, out, err = await cli("standing-approvals", "revoke", "--id", sid, "--url", url)
    assert code == 0 and out.startswith(f"revoked {sid}"), err
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 202
    code, _, err = await cli("standing-approvals", "add", "--team", team, "--tool", TOOL,
                             "--args", "[1]", "--max-calls", "2", "--url", url)
    assert code == 1 and "--args must be a JSON object" in err
    code, _, err = await cli("standing-approvals", "add", "--team", team, "--tool", "math",
                             "--max-calls", "2", "--url", url)
    assert code == 1 and "invalid_request" in err


async def test_a_team_rule_asking_for_approval_per_call_wins(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team)
    agent = await reader(client, token, team)
    gov = token(agent="gov", team=team, role="governance")
    _, sa = await standing(client, gov, team_id=team, tool=TOOL, expires_at=later(), max_calls=5)
    await asyncio.sleep(0.2)
    assert (await invoke(client, agent, TOOL, {"meter_id": m}))[0] == 200
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": TOOL, "require_approval": True})
    assert r.status == 201, await r.text()
    await asyncio.sleep(0.3)
    status, body = await invoke(client, agent, TOOL, {"meter_id": m})
    assert (status, body["status"]) == (202, "AUTHORIZATION_REQUIRED")
    assert (await listed(client, gov))[0]["used_calls"] == 1  # not counted


async def test_a_slow_older_read_never_undoes_a_newer_one(db_pool, team) -> None:
    """A replica's cache: reads apply in the order they began. Real rows from Postgres; only
    the moment each read's answer is applied is held back, so the older one lands last."""
    from pdp.data.standing import StandingApprovals, StandingRepository

    class HeldBack(StandingRepository):
        gates: list[asyncio.Event] = []

        async def live_rows(self, team_id: str | None = None):  # type: ignore[override]
            rows = await super().live_rows(team_id)
            await self.gates.pop(0).wait()
            return rows

    repo = HeldBack(db_pool)
    cache = StandingApprovals(repo, listener=None)  # type: ignore[arg-type]  # never started
    ids = lambda: [lv.approval.standing_approval_id for lv in cache._by_key.get((team, TOOL), [])]

    async def add() -> str:
        a = await repo.add(team_id=team, agent_id=None, tool=TOOL, args=None, args_schema=None,
                           expires_at=datetime.now(timezone.utc) + timedelta(hours=1), max_calls=5,
                           reason="", created_by="governance:g@x", creator_agent="g", creator_team="x")
        return a.standing_approval_id

    old, new = asyncio.Event(), asyncio.Event()
    repo.gates[:] = [old, new]
    older = asyncio.ensure_future(cache.reload_team(team))  # reads: nothing yet
    await asyncio.sleep(0.2)
    first = await add()
    newer = asyncio.ensure_future(cache.reload_team(team))  # reads: the new one
    await asyncio.sleep(0.2)
    new.set()
    await newer
    old.set()
    await older
    assert ids() == [first]

    full, one = asyncio.Event(), asyncio.Event()
    repo.gates[:] = [full, one]
    stale = asyncio.ensure_future(cache.reload_all())  # reads: the first one only
    await asyncio.sleep(0.2)
    second = await add()
    one.set()
    await cache.reload_team(team)  # reads both, applied first
    full.set()
    await stale
    assert sorted(ids()) == sorted([first, second])
