"""Usage: exactly one row per call, daily rollups, and the team-scoped usage API."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import pytest

from proxy.records.entry import Entry, entry_doc
from proxy.records.batch_write import write_docs
from proxy.records.usage import UsageRecord
from tests.support.calls import bearer, grant, invoke


async def rows_for(db_pool, team: str, expected: int, timeout: float = 10.0) -> list[dict]:
    """Usage is written off the request path: wait until the expected rows have landed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        rows = [dict(r) for r in await db_pool.fetch(
            "SELECT * FROM usage_records WHERE team_id = $1 ORDER BY started_at", team)]
        if len(rows) >= expected or loop.time() > deadline:
            return rows
        await asyncio.sleep(0.05)


async def test_one_row_per_call_with_every_field(client, token, team, db_pool) -> None:
    tok = token(agent="ag-1", team=team)
    _, ok = await invoke(client, tok, "math", {"expr": "6*7"}, context={"agent_run_id": "run-1"})
    _, failed = await invoke(client, tok, "math", {"expr": "1/0"})
    _, denied = await invoke(client, tok, "task.list")
    rows = await rows_for(db_pool, team, 3)
    assert len(rows) == 3
    by_call = {str(r["call_id"]): r for r in rows}
    r = by_call[ok["call_id"]]
    assert (r["agent_id"], r["team_id"], r["agent_run_id"], r["tool"], r["category"]) == (
        "ag-1", team, "run-1", "math", "A")
    assert (r["decision"], r["status"], r["http_status"], r["error_code"]) == ("allow", "COMPLETED", 200, None)
    assert str(r["result_id"]) == ok["result_id"] and str(r["decision_id"]) == ok["decision_id"]
    assert r["cost_1t"] == pytest.approx(0.00002) and r["tokens_used"] == 0
    assert r["latency_ms"] > 0 and r["finished_at"] >= r["started_at"]
    assert r["day"] == r["finished_at"].astimezone(timezone.utc).date()
    f = by_call[failed["call_id"]]
    assert (f["status"], f["error_code"], f["http_status"]) == ("FAILED", "tool_error", 200)
    d = by_call[denied["call_id"]]
    assert (d["decision"], d["status"], d["http_status"], d["result_id"]) == ("deny", "DENIED", 403, None)
    assert d["cost_1t"] == 0


async def test_pricing_uses_reported_metering(client, token, team, db_pool) -> None:
    await grant(client, token, team, "tool.testsvc.metered.invoke")
    await asyncio.sleep(0.2)
    status, body = await invoke(client, token(team=team), "testsvc.metered", {"tokens": 100})
    assert status == 200, body
    # 0.5 per call + 100 tokens * 0.01 + 0.25 compute units * 2.0
    assert body["cost_1t"] == pytest.approx(2.0)
    assert body["tokens_used"] == 100
    rows = await rows_for(db_pool, team, 1)
    assert rows[0]["tokens_used"] == 100 and rows[0]["compute_units"] == pytest.approx(0.25)


async def test_rollup_and_usage_api(client, token, team, db_pool) -> None:
    tok = token(agent="ag-2", team=team)
    for expr in ("1+1", "2+2", "1/0"):
        await invoke(client, tok, "math", {"expr": expr})
    await invoke(client, tok, "task.list")
    await rows_for(db_pool, team, 4)
    day = datetime.now(timezone.utc).date().isoformat()
    r = await client.get(f"/v1/usage?day={day}", headers=bearer(tok))
    body = await r.json()
    assert r.status == 200
    assert body["team_id"] == team and body["day"] == day
    t = body["totals"]
    assert (t["calls"], t["invocations"], t["completed"], t["failed"], t["denied"]) == (4, 3, 2, 1, 1)
    assert t["cost_1t"] == pytest.approx(3 * 0.00002)
    tools = {row["tool"]: row for row in body["by_tool"]}
    assert tools["math"]["calls"] == 3 and tools["task.list"]["denied"] == 1


async def test_usage_is_team_scoped(client, token, team, db_pool) -> None:
    other = f"t_{uuid.uuid4().hex[:10]}"
    await invoke(client, token(team=team), "math", {"expr": "1"})
    await rows_for(db_pool, team, 1)
    r = await client.get("/v1/usage", headers=bearer(token(team=other)))
    assert (await r.json())["totals"]["calls"] == 0
    # An agent cannot name another team; an admin can.
    r = await client.get(f"/v1/usage?team_id={team}", headers=bearer(token(team=other)))
    assert r.status == 403
    r = await client.get(f"/v1/usage?team_id={team}", headers=bearer(token(team="ops", role="admin")))
    assert r.status == 200 and (await r.json())["totals"]["calls"] == 1


async def test_bad_day_is_400(client, token, team) -> None:
    r = await client.get("/v1/usage?day=yesterday", headers=bearer(token(team=team)))
    assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_request"


async def test_redelivered_record_is_written_once(db_pool) -> None:
    """The writer may see a record twice (redelivery after a crash): one row, one rollup."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    now = datetime.now(timezone.utc)
    rec = UsageRecord(
        call_id=str(uuid.uuid4()), result_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()),
        team_id=team, agent_id="a", agent_run_id=None, tool="math", category="A", action="read",
        decision="allow", status="COMPLETED", error_code=None, http_status=200, latency_ms=1.0,
        cost_1t=0.5, started_at=now, finished_at=now,
    )
    doc = entry_doc(Entry(usage=rec, key=rec.call_id))
    assert await write_docs(db_pool, [doc, doc]) == 1
    assert await write_docs(db_pool, [doc]) == 0
    assert await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 1
    roll = await db_pool.fetchrow("SELECT calls, cost_1t FROM usage_daily WHERE team_id = $1", team)
    assert (roll["calls"], roll["cost_1t"]) == (1, 0.5)


async def test_usage_range_grouped(client, token, team, db_pool) -> None:
    for agent, expr in (("a1", "1"), ("a1", "2"), ("a2", "3")):
        await invoke(client, token(agent=agent, team=team), "math", {"expr": expr})
    await invoke(client, token(agent="a2", team=team), "text", {"op": "upper", "text": "x"})
    await rows_for(db_pool, team, 4)
    today = datetime.now(timezone.utc).date().isoformat()
    tok = token(agent="a1", team=team)
    r = await client.get("/v1/usage", params={"from": today, "to": today, "group_by": "agent"},
                         headers=bearer(tok))
    body = await r.json()
    assert r.status == 200 and body["group_by"] == "agent"
    assert {g["key"]: g["calls"] for g in body["groups"]} == {"a1": 2, "a2": 2}
    assert body["totals"]["calls"] == 4
    r = await client.get("/v1/usage", params={"group_by": "tool"}, headers=bearer(tok))
    assert {g["key"]: g["invocations"] for g in (await r.json())["groups"]} == {"math": 3, "text": 1}
    r = await client.get("/v1/usage", params={"group_by": "day"}, headers=bearer(tok))
    assert [g["key"] for g in (await r.json())["groups"]] == [today]
    for bad in ({"group_by": "team"}, {"from": "2026-02-30"}, {"from": today, "to": "2020-01-01"},
                {"from": "2000-01-01", "to": today}):
        r = await client.get("/v1/usage", params=bad, headers=bearer(tok))
        assert r.status == 400, bad
