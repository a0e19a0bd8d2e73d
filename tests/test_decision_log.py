"""The decision log: every decision recorded durably, queryable by governance, redacted."""

from __future__ import annotations

import asyncio

from wire.digest import args_digest
from tests.support.calls import bearer, grant, invoke


async def logged(client, tok: str, expected: int, timeout: float = 10.0, **params: str) -> list[dict]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/admin/decisions", params=params, headers=bearer(tok))
        assert r.status == 200, await r.text()
        rows = (await r.json())["decisions"]
        if len(rows) >= expected or loop.time() > deadline:
            return rows
        await asyncio.sleep(0.05)


async def test_every_call_decision_is_logged(client, token, team) -> None:
    agent = token(agent="ag", team=team)
    gov = token(agent="gov", team=team, role="governance")
    _, ok = await invoke(client, agent, "math", {"expr": "1+1"})
    _, denied = await invoke(client, agent, "task.list")
    rows = await logged(client, gov, 2, phase="call")
    by_id = {r["decision_id"]: r for r in rows}
    allow = by_id[ok["decision_id"]]
    assert allow["result"] == "allow" and allow["reasons"] == ["category_a_default"]
    assert allow["call_id"] == ok["call_id"] and allow["tool"] == "math"
    assert allow["policy_revision"] and allow["engine"] == "embedded"
    assert allow["latency_us"] > 0
    assert allow["input"]["args"] == {"expr": "1+1"}
    assert allow["input"]["subject"] == {"agent_id": "ag", "team_id": team, "roles": ["agent"],
                                        "scopes": []}
    deny = by_id[denied["decision_id"]]
    assert deny["result"] == "deny" and deny["reasons"] == ["grant_required"]
    # Filters
    only_deny = await logged(client, gov, 1, result="deny", phase="call")
    assert [r["decision_id"] for r in only_deny] == [denied["decision_id"]]


async def test_list_phase_decisions_are_logged(client, token, team) -> None:
    agent = token(agent="lister", team=team)
    r = await client.get("/v1/tools", headers=bearer(agent))
    assert r.status == 200
    gov = token(agent="gov", team=team, role="governance")
    rows = await logged(client, gov, 1, phase="list", agent_id="lister")
    tools = {row["tool"]: row["result"] for row in rows}
    assert tools["math"] == "allow" and tools["greenfood.order"] == "deny"


async def test_confidential_arguments_are_never_logged(client, token, team) -> None:
    agent = token(agent="ag", team=team)
    secret = {"op": "upper", "text": "the launch code is 1234"}
    status, body = await invoke(client, agent, "text", secret, context={"confidential": True})
    assert status == 200
    gov = token(agent="gov", team=team, role="governance")
    rows = await logged(client, gov, 1, call_id=body["call_id"])
    digest, size = args_digest(secret)
    assert rows[0]["input"]["args"] == {"sha256": digest, "size": size}
    assert "1234" not in str(rows[0])


async def test_decisions_are_team_scoped(client, token, team) -> None:
    await invoke(client, token(agent="ag", team=team), "math", {"expr": "2"})
    other_gov = token(agent="gov", team="another-team", role="governance")
    r = await client.get("/v1/admin/decisions", params={"team_id": team}, headers=bearer(other_gov))
    assert r.status == 403
    rows = await logged(client, other_gov, 0)
    assert all(row["team_id"] == "another-team" for row in rows)
    admin = token(agent="root", team="ops", role="admin")
    assert await logged(client, admin, 1, team_id=team)


async def test_approval_decisions_are_logged(client, token, team) -> None:
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    _, held = await invoke(client, token(agent="buyer", team=team), "greenfood.order",
                           {"op": "get_inventory"})
    gov = token(agent="gov", team=team, role="governance")
    rows = await logged(client, gov, 1, call_id=held["call_id"])
    assert rows[0]["result"] == "approval_required"
