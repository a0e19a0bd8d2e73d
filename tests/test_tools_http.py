"""Every built-in tool through the whole pipeline (HTTP -> PDP -> NATS -> service -> usage)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.calls import grant, invoke


@pytest.mark.parametrize(
    "tool, args, expected",
    [
        ("math", {"expr": "2+3*4"}, {"value": 14}),
        ("math", {"expr": "sqrt(16) + 2**10"}, {"value": 1028}),
        ("text", {"op": "upper", "text": "hello"}, {"text": "HELLO"}),
        ("text", {"op": "slugify", "text": "Héllo, Wörld!"}, {"text": "hello-world"}),
        ("text", {"op": "word_count", "text": "one two  three"}, {"count": 3}),
        ("calendar", {"op": "business_days", "start": "2026-11-30", "end": "2026-12-07"},
         {"business_days": 5, "holidays_excluded": 0}),
    ],
)
async def test_category_a_tool(client, token, team, tool, args, expected) -> None:
    status, body = await invoke(client, token(team=team), tool, args)
    assert status == 200, body
    assert body["output"] == expected


async def test_calendar_convert(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "calendar", {
        "op": "convert", "datetime": "2026-07-01T12:00:00", "from_tz": "Europe/Paris",
        "to_tz": "America/New_York"})
    assert status == 200, body
    assert body["output"]["datetime"] == "2026-07-01T06:00:00-04:00"


async def test_memory_summary(client, token, team) -> None:
    text = ("The proxy checks every tool call against policy. Cats sleep a lot. "
            "Policy decides whether the tool call may proceed. The weather was fine.")
    status, body = await invoke(client, token(team=team), "memory", {"text": text, "max_sentences": 2})
    assert status == 200, body
    assert body["output"]["sentences"] == [
        "The proxy checks every tool call against policy.",
        "Policy decides whether the tool call may proceed.",
    ]


async def test_embeddings(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "embeddings", {"texts": ["a cat", "a cat"]})
    assert status == 200, body
    out = body["output"]
    assert out["model"] == "toolproxy-hash-v1" and out["dimensions"] == 256
    assert out["embeddings"][0] == out["embeddings"][1]
    assert abs(sum(x * x for x in out["embeddings"][0]) - 1.0) < 1e-3


async def test_category_b_read_and_write_grants_are_separate(client, token, team) -> None:
    tok = token(agent="writer", team=team)
    await grant(client, token, team, "tool.task.list.invoke")
    await asyncio.sleep(0.2)
    # A read grant never implies the write tool.
    status, body = await invoke(client, tok, "task.create", {"title": "ship it"})
    assert (status, body["error"]["reasons"]) == (403, ["grant_required"])
    await grant(client, token, team, "tool.task.create.invoke", agent_id="writer")
    await asyncio.sleep(0.2)
    status, created = await invoke(client, tok, "task.create", {"title": "ship it"})
    assert status == 200, created
    assert created["output"]["title"] == "ship it" and created["output"]["status"] == "open"
    # The grant named one agent: a teammate still cannot write.
    status, _ = await invoke(client, token(agent="other", team=team), "task.create", {"title": "x"})
    assert status == 403
    status, listed = await invoke(client, tok, "task.list")
    assert status == 200
    assert [t["task_id"] for t in listed["output"]["tasks"]] == [created["output"]["task_id"]]


async def test_category_c_named_queries_only(client, token, team) -> None:
    tok = token(team=team)
    status, _ = await invoke(client, tok, "data.query", {"query": "tasks_by_status", "params": {"status": "open"}})
    assert status == 403
    await grant(client, token, team, "tool.data.query.invoke")
    await asyncio.sleep(0.2)
    status, body = await invoke(client, tok, "data.query", {"query": "tasks_by_status", "params": {"status": "open"}})
    assert status == 200, body
    assert body["output"]["rows"] == [] and body["output"]["truncated"] is False
    # Raw SQL is not a named query: refused by the schema before any policy or service.
    status, body = await invoke(client, tok, "data.query", {"query": "SELECT * FROM grants"})
    assert (status, body["error"]["code"]) == (400, "invalid_args")


async def test_category_d_never_changes_prices_or_stock(client, token, team, db_pool, bus_spy) -> None:
    tok = token(team=team)
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    for args in ({"op": "set_price", "product_id": "apple", "price": 0.01},
                 {"op": "adjust_stock", "product_id": "apple", "delta": 1000}):
        status, body = await invoke(client, tok, "greenfood.order", args)
        assert status == 403
        assert "greenfood_op_forbidden" in body["error"]["reasons"]
    await bus_spy.settle()
    assert bus_spy.subjects == []
    price = await db_pool.fetchval("SELECT price FROM greenfood_products WHERE product_id = 'apple'")
    assert float(price) == 0.5


async def test_category_d_needs_approval_even_with_a_grant(client, token, team, bus_spy) -> None:
    tok = token(team=team)
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    status, body = await invoke(client, tok, "greenfood.order", {"op": "create_order", "product_id": "milk", "qty": 1})
    assert status in (202, 403)  # 202 once approvals exist; never executed without one
    assert body["status"] in ("AUTHORIZATION_REQUIRED", "DENIED")
    await bus_spy.settle()
    assert bus_spy.subjects == []
