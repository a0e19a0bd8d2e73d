"""The DAARION platforms through the whole pipeline: EnergyUnion and Water Union meters (a team's
own, readings over a bounded, validated range), the operator-only valve, the seeded demo data."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.calls import bearer, grant, invoke
from tests.support.approvals import decide, later, resume, standing

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


async def meter(db_pool, team: str, platform: str, readings: int) -> str:
    """A meter with one reading per hour from T0: value 10 + hour."""
    meter_id = f"{platform[0]}m-{uuid.uuid4().hex[:10]}"
    await db_pool.execute(
        "INSERT INTO platform_meters (meter_id, platform, team_id) VALUES ($1, $2, $3)",
        meter_id, platform, team)
    await db_pool.execute(
        """INSERT INTO platform_readings (meter_id, at, value)
           SELECT $1, $2::timestamptz + make_interval(hours => i), 10 + i FROM generate_series(0, $3 - 1) AS i""",
        meter_id, T0, readings)
    return meter_id


async def pre_approved(client, token, team: str, tool: str, agent: str = "ops-bot") -> str:
    """An agent with a grant, a generous rate and a standing approval for `tool`."""
    admin = token(agent="root", team="ops", role="admin")
    await grant(client, token, team, f"tool.{tool}.invoke")
    r = await client.post("/v1/admin/overrides", headers=bearer(admin), json={
        "team_id": team, "agent_id": agent, "tool": tool, "rate_per_minute": 6000})
    assert r.status == 201
    gov = token(agent="gov", team=team, role="governance")
    status, body = await standing(client, gov, team_id=team, tool=tool, expires_at=later(), max_calls=100)
    assert status == 201, body
    await asyncio.sleep(0.2)
    return token(agent=agent, team=team)


async def recent_meter(db_pool, team: str, platform: str) -> str:
    """A meter whose five hourly readings end at the current hour."""
    meter_id = f"{platform[0]}m-{uuid.uuid4().hex[:10]}"
    await db_pool.execute(
        "INSERT INTO platform_meters (meter_id, platform, team_id) VALUES ($1, $2, $3)",
        meter_id, platform, team)
    await db_pool.execute(
        """INSERT INTO platform_readings (meter_id, at, value)
           SELECT $1, date_trunc('hour', now()) - make_interval(hours => i), 1 FROM generate_series(0, 4) AS i""",
        meter_id)
    return meter_id


def iso(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


@pytest.mark.parametrize(("tool", "platform", "key", "unit"), [
    ("energy.meter.read", "energy", "kwh", "kWh"),
    ("water.usage.read", "water", "liters", "L"),
])
async def test_meter_readings(client, token, team, db_pool, tool, platform, key, unit) -> None:
    m = await meter(db_pool, team, platform, readings=48)
    agent = await pre_approved(client, token, team, tool)
    status, body = await invoke(client, agent, tool, {"meter_id": m})
    assert status == 200, body
    assert body["output"] == {"meter_id": m, "unit": unit, "truncated": False,
                              "readings": [{"at": iso(47), key: 57.0}]}
    status, body = await invoke(client, agent, tool, {"meter_id": m, "from": iso(2), "to": iso(5)})
    assert [r[key] for r in body["output"]["readings"]] == [12.0, 13.0, 14.0, 15.0]
    # A UTC offset is honoured (22:30+01:00 is 21:30 UTC).
    status, body = await invoke(client, agent, tool, {"meter_id": m, "from": "2026-03-02T22:30:00+01:00",
                                                      "to": "2026-03-03T00:00:00+01:00"})
    assert [r["at"] for r in body["output"]["readings"]] == [iso(46), iso(47)]
    # `from` alone runs to now (so it must be within 31 days of now).
    status, body = await invoke(client, agent, tool, {"meter_id": m, "from": iso(0)})
    assert body["error"]["tool_code"] == "range_too_large"
    recent = await recent_meter(db_pool, team, platform)
    hour = await db_pool.fetchval("SELECT max(at) FROM platform_readings WHERE meter_id = $1", recent)
    since = (hour - timedelta(hours=2, minutes=30)).isoformat()
    status, body = await invoke(client, agent, tool, {"meter_id": recent, "from": since})
    assert len(body["output"]["readings"]) == 3, body


@pytest.mark.parametrize(("args", "code"), [
    ({"to": "2026-03-01T05:00:00Z"}, "invalid_range"),
    ({"from": "2026-03-01T05:00:00Z", "to": "2026-03-01T05:00:00Z"}, "invalid_range"),
    ({"from": "2026-03-02T05:00:00Z", "to": "2026-03-01T05:00:00Z"}, "invalid_range"),
    ({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}, "range_too_large"),
    ({"from": "2026-02-30T00:00:00Z"}, "invalid_range"),
])
async def test_ranges_are_validated(client, token, team, db_pool, args, code) -> None:
    m = await meter(db_pool, team, "energy", readings=2)
    agent = await pre_approved(client, token, team, "energy.meter.read")
    status, body = await invoke(client, agent, "energy.meter.read", {"meter_id": m, **args})
    assert (status, body["status"], body["error"]["tool_code"]) == (200, "FAILED", code), body


@pytest.mark.parametrize("args", [
    {"meter_id": "em-1", "from": "yesterday"},
    {"meter_id": "em-1", "from": "2026-03-01T05:00:00"},  # no offset
    {"meter_id": "em-1", "from": "2026-03-01T05:00:00Z" + " " * 40},
    {"meter_id": "EM 1"},
    {"meter_id": "em-1", "team_id": "other"},
    {},
])
async def test_bad_arguments_never_reach_the_service(client, token, team, args) -> None:
    agent = token(agent="ops-bot", team=team)
    status, body = await invoke(client, agent, "energy.meter.read", args)
    assert (status, body["error"]["code"]) == (400, "invalid_args")


async def test_a_meter_of_another_team_is_unknown(client, token, team, db_pool) -> None:
    theirs = await meter(db_pool, f"t_{uuid.uuid4().hex[:10]}", "energy", readings=2)
    water = await meter(db_pool, team, "water", readings=2)
    agent = await pre_approved(client, token, team, "energy.meter.read")
    for meter_id in (theirs, "em-does-not-exist", water):
        status, body = await invoke(client, agent, "energy.meter.read", {"meter_id": meter_id})
        assert (status, body["error"]["tool_code"]) == (200, "unknown_meter"), body
        assert "readings" not in str(body.get("output"))


async def test_readings_are_bounded(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team, "energy", readings=0)
    await db_pool.execute(
        """INSERT INTO platform_readings (meter_id, at, value)
           SELECT $1, $2::timestamptz + make_interval(mins => i), 1 FROM generate_series(0, 1099) AS i""",
        m, T0)
    agent = await pre_approved(client, token, team, "energy.meter.read")
    status, body = await invoke(client, agent, "energy.meter.read", {"meter_id": m, "from": iso(0), "to": iso(24)})
    assert status == 200
    assert len(body["output"]["readings"]) == 1000 and body["output"]["truncated"] is True


async def test_per_call_approval_of_a_meter_read(client, token, team, db_pool) -> None:
    m = await meter(db_pool, team, "energy", readings=3)
    await grant(client, token, team, "tool.energy.meter.read.invoke")
    await asyncio.sleep(0.2)
    agent = token(agent="reader", team=team)
    gov = token(agent="gov", team=team, role="governance")
    status, held = await invoke(client, agent, "energy.meter.read", {"meter_id": m})
    assert status == 202 and held["status"] == "AUTHORIZATION_REQUIRED"
    assert (await decide(client, gov, held["approval_id"], "approve"))[0] == 200
    status, done = await resume(client, agent, held["call_id"])
    assert status == 200 and done["output"]["readings"][0]["kwh"] == 12.0


async def test_the_valve_is_for_operators_only(client, token, team, db_pool) -> None:
    valve = f"wv-{uuid.uuid4().hex[:10]}"
    await db_pool.execute("INSERT INTO platform_valves (valve_id, team_id, open) VALUES ($1, $2, true)",
                          valve, team)
    await grant(client, token, team, "tool.water.valve.set.invoke")
    await asyncio.sleep(0.2)
    # Agents: denied, granted or not, approved or not; not even listed.
    agent = token(agent="ops-bot", team=team)
    status, body = await invoke(client, agent, "water.valve.set", {"valve_id": valve, "open": False})
    assert (status, body["error"]["reasons"]) == (403, ["operator_only_tool"])
    r = await client.get("/v1/tools", headers=bearer(agent))
    assert "water.valve.set" not in {t["tool_id"] for t in (await r.json())["tools"]}
    # An operator (admin token of the team) with a governance approval.
    operator = token(agent="operator", team=team, role="admin")
    root = token(agent="root", team="ops", role="admin")
    r = await client.post("/v1/admin/overrides", headers=bearer(root), json={
        "team_id": team, "agent_id": "operator", "tool": "water.valve.set", "rate_per_minute": 600})
    assert r.status == 201  # a rate above category D's 5 a minute
    gov = token(agent="gov", team=team, role="governance")
    status, held = await invoke(client, operator, "water.valve.set", {"valve_id": valve, "open": False})
    assert status == 202, held
    await decide(client, gov, held["approval_id"], "approve")
    status, done = await resume(client, operator, held["call_id"])
    assert (status, done["output"]) == (200, {"valve_id": valve, "open": False, "changed": True})
    row = await db_pool.fetchrow("SELECT open, updated_by FROM platform_valves WHERE valve_id = $1", valve)
    assert (row["open"], row["updated_by"]) == (False, f"operator@{team}")
    # Another team's valve does not exist for this operator.
    status, held = await invoke(client, operator, "water.valve.set", {"valve_id": "wv-001", "open": False})
    await decide(client, gov, held["approval_id"], "approve")
    status, done = await resume(client, operator, held["call_id"])
    assert done["error"]["tool_code"] == "unknown_valve"
    assert await db_pool.fetchval("SELECT open FROM platform_valves WHERE valve_id = 'wv-001'") is True


async def test_the_demo_data_is_seeded(db_pool) -> None:
    rows = await db_pool.fetch(
        """SELECT m.meter_id, m.platform, m.team_id, count(r.*) AS n, max(r.at) AS latest
           FROM platform_meters m JOIN platform_readings r USING (meter_id)
           WHERE m.meter_id IN ('em-001', 'em-002', 'wm-001') GROUP BY 1, 2, 3 ORDER BY 1""")
    assert [(r["meter_id"], r["platform"], r["team_id"]) for r in rows] == [
        ("em-001", "energy", "team-1"), ("em-002", "energy", "team-1"), ("wm-001", "water", "team-1")]
    assert all(r["n"] == 14 * 24 + 1 for r in rows)
    assert all(r["latest"] <= datetime.now(timezone.utc) for r in rows)
    assert await db_pool.fetchval("SELECT team_id FROM platform_valves WHERE valve_id = 'wv-001'") == "team-1"
