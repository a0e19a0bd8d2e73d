"""Approvals with resume, through HTTP: exactly once, bound to agent, call and arguments."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support import fixture_services
from tests.support.approvals import decide, resume
from tests.support.calls import bearer, grant, invoke

ORDER = {"op": "create_order", "product_id": "bread", "qty": 2}


async def stock(db_pool, product: str = "bread") -> int:
    return await db_pool.fetchval("SELECT stock FROM greenfood_products WHERE product_id = $1", product)


async def approvals(client, tok: str, **params: str) -> tuple[int, dict]:
    r = await client.get("/v1/approvals", params=params, headers=bearer(tok))
    return r.status, await r.json()


async def usage_rows(db_pool, call_id: str, expected: int = 1, timeout: float = 10.0) -> list:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        rows = await db_pool.fetch("SELECT * FROM usage_records WHERE call_id = $1", uuid.UUID(call_id))
        if len(rows) >= expected or loop.time() > deadline:
            return rows
        await asyncio.sleep(0.05)


@pytest.fixture
async def buyer(client, token, team):
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    return token(agent="buyer", team=team)


async def test_full_approval_flow(client, token, team, buyer, db_pool, bus_spy) -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    before = await stock(db_pool)
    status, held = await invoke(client, buyer, "greenfood.order", ORDER)
    assert status == 202, held
    assert held["status"] == "AUTHORIZATION_REQUIRED"
    assert held["error"]["code"] == "authorization_required"
    assert "approval_required" in held["error"]["reasons"]
    call_id, approval_id = held["call_id"], held["approval_id"]
    await bus_spy.settle()
    assert bus_spy.subjects == []  # nothing executed
    assert await stock(db_pool) == before

    # Governance sees it; agents cannot list or decide (their own call included).
    status, listed = await approvals(client, gov)
    assert status == 200
    mine = [a for a in listed["approvals"] if a["approval_id"] == approval_id]
    assert mine and mine[0]["state"] == "pending" and mine[0]["agent_id"] == "buyer"
    assert (await approvals(client, buyer))[0] == 403
    assert (await decide(client, buyer, approval_id, "approve"))[0] == 403
    assert (await decide(client, token(agent="other", team=team), approval_id, "approve"))[0] == 403
    # Another team's governance does not even see it.
    assert (await decide(client, token(agent="g2", team="elsewhere", role="governance"),
                         approval_id, "approve"))[0] == 404

    # Resuming before the decision: still waiting.
    status, body = await resume(client, buyer, call_id)
    assert (status, body["status"]) == (202, "AUTHORIZATION_REQUIRED")

    status, decided = await decide(client, gov, approval_id, "approve", "ok for the demo")
    assert status == 200 and decided["approval"]["state"] == "approved"
    assert decided["approval"]["decided_by"] == f"governance:gov-1@{team}"
    assert (await decide(client, gov, approval_id, "deny"))[0] == 409  # decided once

    # Only the calling agent may resume.
    assert (await resume(client, token(agent="someone", team=team), call_id))[0] == 404
    status, done = await resume(client, buyer, call_id)
    assert status == 200, done
    assert done["status"] == "COMPLETED" and done["call_id"] == call_id
    assert done["output"]["status"] == "created" and done["output"]["qty"] == 2
    assert await stock(db_pool) == before - 2

    # A second resume returns the same result and executes nothing.
    status, again = await resume(client, buyer, call_id)
    assert (status, again) == (200, done)
    assert await stock(db_pool) == before - 2
    rows = await usage_rows(db_pool, call_id)
    assert len(rows) == 1 and rows[0]["status"] == "COMPLETED"


async def test_concurrent_resumes_execute_once(client, token, team, buyer, db_pool) -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    before = await stock(db_pool)
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    await decide(client, gov, held["approval_id"], "approve")
    results = await asyncio.gather(*(resume(client, buyer, held["call_id"]) for _ in range(6)))
    done = [b for s, b in results if s == 200]
    assert done, results
    assert all(b == done[0] for b in done)  # one result, replayed
    assert all(s in (200, 409) for s, _ in results)  # 409: still executing at that instant
    assert await stock(db_pool) == before - 2


async def test_denied_approval(client, token, team, buyer, db_pool) -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    before = await stock(db_pool)
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    status, _ = await decide(client, gov, held["approval_id"], "deny", "not today")
    assert status == 200
    status, body = await resume(client, buyer, held["call_id"])
    assert status == 403
    assert body["status"] == "DENIED" and "approval_denied" in body["error"]["reasons"]
    assert await stock(db_pool) == before
    rows = await usage_rows(db_pool, held["call_id"])
    assert len(rows) == 1 and rows[0]["status"] == "DENIED"
    assert (await resume(client, buyer, held["call_id"])) == (403, body)


async def test_approval_expires(aiohttp_client, settings, builtin, token, team, db_pool) -> None:
    app = create_app(settings.model_copy(update={"approval_ttl_s": 1}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["greenfood.order"])
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    buyer = token(agent="buyer", team=team)
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    assert held["status"] == "AUTHORIZATION_REQUIRED"
    await asyncio.sleep(1.3)
    gov = token(agent="gov-1", team=team, role="governance")
    status, body = await decide(client, gov, held["approval_id"], "approve")
    assert status == 409 and "expired" in body["error"]["message"]
    status, body = await resume(client, buyer, held["call_id"])
    assert status == 403 and "approval_expired" in body["error"]["reasons"]
    rows = await usage_rows(db_pool, held["call_id"])
    assert len(rows) == 1 and rows[0]["status"] == "DENIED"


async def test_changed_arguments_need_a_new_approval(client, token, team, buyer, db_pool) -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    await decide(client, gov, held["approval_id"], "approve")
    tampered = {**ORDER, "qty": 200}
    status, body = await resume(client, buyer, held["call_id"], args=tampered)
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    # The approval was not consumed: the approved arguments still run, once.
    before = await stock(db_pool)
    status, body = await resume(client, buyer, held["call_id"])
    assert status == 200 and body["output"]["qty"] == 2
    assert await stock(db_pool) == before - 2
    # Invoking with new arguments is a new call, with a new approval.
    status, again = await invoke(client, buyer, "greenfood.order", tampered)
    assert status == 202 and again["call_id"] != held["call_id"]


async def test_no_self_approval(client, token, team, buyer) -> None:
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    same_person = token(agent="buyer", team=team, role="governance")
    status, body = await decide(client, same_person, held["approval_id"], "approve")
    assert status == 403 and "self-authorization" in body["error"]["message"]


async def test_confidential_call_keeps_no_arguments(client, token, team, db_pool) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    await asyncio.sleep(0.2)
    agent = token(agent="secret-agent", team=team)
    status, held = await invoke(client, agent, "testsvc.guarded", {"amount": 7},
                                context={"confidential": True})
    assert status == 202, held
    row = await db_pool.fetchrow("SELECT args, args_hash, args_size FROM calls WHERE call_id = $1",
                                 uuid.UUID(held["call_id"]))
    assert row["args"] is None and len(row["args_hash"]) == 64 and row["args_size"] > 0
    await decide(client, token(agent="gov-1", team=team, role="governance"), held["approval_id"], "approve")
    assert (await resume(client, agent, held["call_id"]))[0] == 400  # args must be sent again
    assert (await resume(client, agent, held["call_id"], {"amount": 8}))[0] == 400  # and match
    fixture_services.guarded_calls.clear()
    status, body = await resume(client, agent, held["call_id"], {"amount": 7})
    assert status == 200 and body["output"] == {"done": 7}
    assert fixture_services.guarded_calls == [{"call_id": held["call_id"], "amount": 7}]


async def test_confidential_mode_excludes_category_d(client, token, team, buyer, bus_spy) -> None:
    status, body = await invoke(client, buyer, "greenfood.order", ORDER, context={"confidential": True})
    assert status == 403
    assert "confidential_excludes_category_d" in body["error"]["reasons"]
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_admin_lists_every_team(client, token, team, buyer) -> None:
    _, held = await invoke(client, buyer, "greenfood.order", ORDER)
    admin = token(agent="root", team="ops", role="admin")
    status, listed = await approvals(client, admin, state="pending", team_id=team)
    assert status == 200
    assert [a["approval_id"] for a in listed["approvals"]] == [held["approval_id"]]
    gov_elsewhere = token(agent="g", team="elsewhere", role="governance")
    assert (await approvals(client, gov_elsewhere, team_id=team))[0] == 403


async def test_an_approved_call_refused_for_now_on_resume_keeps_its_approval(
        client, token, team, buyer, db_pool) -> None:
    """A 429 on resume ran nothing: the approval stands, no ending or usage row is written;
    the next resume (once admitted) runs the call exactly once and bills it once."""
    gov = token(agent="gov-1", team=team, role="governance")
    status, held = await invoke(client, buyer, "greenfood.order", ORDER)
    assert status == 202, held
    assert (await decide(client, gov, held["approval_id"], "approve"))[0] == 200
    admin = bearer(token(agent="root", team="ops", role="admin"))
    override = {"team_id": team, "agent_id": "buyer", "tool": "greenfood.order", "effect": "allow",
                "rate_per_minute": 0}
    assert (await client.post("/v1/admin/overrides", json=override, headers=admin)).status == 201
    before = await stock(db_pool)
    status, refused = await resume(client, buyer, held["call_id"])
    assert status == 429 and refused["error"]["code"] == "rate_limited"
    assert await stock(db_pool) == before  # nothing ran
    key = {k: override[k] for k in ("team_id", "agent_id", "tool")}
    assert (await client.post("/v1/admin/overrides/delete", json=key, headers=admin)).status == 200
    status, done = await resume(client, buyer, held["call_id"])
    assert status == 200 and done["status"] == "COMPLETED", done
    assert await stock(db_pool) == before - ORDER["qty"]
    rows = await usage_rows(db_pool, held["call_id"])
    await asyncio.sleep(0.3)
    rows = await usage_rows(db_pool, held["call_id"])
    assert [(r["status"], r["http_status"]) for r in rows] == [("COMPLETED", 200)]
    again = await resume(client, buyer, held["call_id"])
    assert again == (200, done)  # later resumes replay it
