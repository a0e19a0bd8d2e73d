"""The category B, C and D tools (task, data.query, greenfood.order) against a real Postgres."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from jsonschema import Draft202012Validator

from services.data_query import service as data_query_service
from services.data_query import store as data_query_store
from services.tasks import service as task_service
from services.platforms.greenfood import service as greenfood_service
from services.sdk import Service, ToolError, ToolManifest
from services.sdk.service import ToolResult, CallContext
from tests.support.tool_harness import run_tool

AGENT = "agent-1"


def new_team() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def ctx(team: str) -> CallContext:
    return CallContext(
        call_id=str(uuid.uuid4()),
        decision_id=str(uuid.uuid4()),
        team_id=team,
        agent_id=AGENT,
        run_id=None,
        deadline=time.time() + 10,
    )


async def call(svc: Service, tool_id: str, args: dict[str, Any], team: str) -> dict[str, Any]:
    (tool,) = [t for t in svc.tools if t.manifest.tool_id == tool_id]
    result = await tool.handler(args, ctx(team))
    if isinstance(result, ToolResult):  # write tools also name what they created
        if tool.manifest.action == "write":
            assert result.object_refs
        for ref in result.object_refs:
            assert ref["id"] in json.dumps(result.output)
        result = result.output
    assert isinstance(result, dict)
    json.dumps(result)  # JSON-safe: no datetimes, Decimals or UUIDs left
    Draft202012Validator(tool.manifest.output_schema).validate(result)
    return result


async def reply(svc: Service, tool_id: str, args: Any, team: str) -> dict[str, Any]:
    """The reply of the real SDK path (args checked against the input schema first)."""
    (tool,) = [t for t in svc.tools if t.manifest.tool_id == tool_id]
    return await run_tool(tool, args, ctx(team))


def invalid(message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": "invalid_args", "message": f"invalid args: {message}"}}


async def create(pool: asyncpg.Pool, team: str, title: str, **more: Any) -> dict[str, Any]:
    return await call(task_service.service(pool), "task.create", {"title": title, **more}, team)


async def tasks(pool: asyncpg.Pool, team: str, **args: Any) -> dict[str, Any]:
    return await call(task_service.service(pool), "task.list", args, team)


async def query(pool: asyncpg.Pool, team: str, name: Any, params: Any = None, **more: Any) -> Any:
    args = {"query": name, **({} if params is None else {"params": params}), **more}
    return await call(data_query_service.service(pool), "data.query", args, team)


async def greenfood(pool: asyncpg.Pool, team: str, **args: Any) -> dict[str, Any]:
    return await call(greenfood_service.service(pool), "greenfood.order", args, team)


async def set_status(pool: asyncpg.Pool, task_id: str, status: str) -> None:
    sql = "UPDATE tasks SET status = $2 WHERE task_id = $1"
    await pool.execute(sql, uuid.UUID(task_id), status)


# --- task.list / task.create (category B) -------------------------------------------------


async def test_task_create_stores_the_task_for_the_callers_team(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    out = await create(db_pool, team, "Buy apples")
    # The original fields, and (since projects) the task's project, assignee and version.
    assert set(out) == {"task_id", "title", "description", "status", "created_at", "created_by",
                        "project_id", "assignee", "version", "updated_at", "completed_at"}
    assert uuid.UUID(out["task_id"]).version == 4
    assert (out["title"], out["description"], out["status"]) == ("Buy apples", "", "open")
    assert (out["project_id"], out["assignee"], out["version"], out["completed_at"]) == (
        None, None, 1, None)
    sql = "SELECT * FROM tasks WHERE task_id = $1"
    row = await db_pool.fetchrow(sql, uuid.UUID(out["task_id"]))
    assert (row["team_id"], row["created_by"], row["title"]) == (team, AGENT, "Buy apples")
    assert dt.datetime.fromisoformat(out["created_at"]) == row["created_at"]


async def test_task_list_is_scoped_to_the_team_and_newest_first(db_pool: asyncpg.Pool) -> None:
    team_a, team_b = new_team(), new_team()
    first = await create(db_pool, team_a, "a1", description="d1")
    await create(db_pool, team_a, "a2")
    await create(db_pool, team_b, "b1")

    listed = await tasks(db_pool, team_a)
    assert listed["count"] == 2
    assert [t["title"] for t in listed["tasks"]] == ["a2", "a1"]
    assert listed["tasks"][1] == {
        "task_id": first["task_id"],
        "title": "a1",
        "description": "d1",
        "status": "open",
        "created_by": AGENT,
        "created_at": first["created_at"],
        "project_id": None,
        "assignee": None,
        "version": 1,
        "updated_at": first["updated_at"],
        "completed_at": None,
    }
    assert [t["title"] for t in (await tasks(db_pool, team_b))["tasks"]] == ["b1"]
    assert await tasks(db_pool, new_team()) == {"tasks": [], "count": 0}


async def test_task_list_filters_by_status(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    ids = [(await create(db_pool, team, title))["task_id"] for title in ("x", "y", "z")]
    await set_status(db_pool, ids[0], "done")
    await set_status(db_pool, ids[1], "in_progress")
    for status, title in (("done", "x"), ("in_progress", "y"), ("open", "z")):
        out = await tasks(db_pool, team, status=status)
        assert [(t["title"], t["status"]) for t in out["tasks"]] == [(title, status)]
        assert out["count"] == 1


async def test_task_list_limit(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    for title in ("t1", "t2", "t3"):
        await create(db_pool, team, title)
    out = await tasks(db_pool, team, limit=2)
    assert ([t["title"] for t in out["tasks"]], out["count"]) == (["t3", "t2"], 2)
    assert (await tasks(db_pool, team, limit=1, status="open"))["count"] == 1
    assert (await tasks(db_pool, team))["count"] == 3
    svc = task_service.service(db_pool)
    for bad, message in (
        (0, "$.limit: 0 is less than the minimum of 1"),
        (101, "$.limit: 101 is greater than the maximum of 100"),
        ("2", "$.limit: '2' is not of type 'integer'"),
    ):
        assert await reply(svc, "task.list", {"limit": bad}, team) == invalid(message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "$: 'title' is a required property"),
        ({"title": ""}, "$.title: '' does not match '^[^\\\\x00]*[^\\\\x00\\\\s][^\\\\x00]*$'"),
        ({"title": "   "}, "$.title: '   ' does not match '^[^\\\\x00]*[^\\\\x00\\\\s][^\\\\x00]*$'"),
        ({"title": "a\x00b"}, "$.title: 'a\\x00b' does not match '^[^\\\\x00]*[^\\\\x00\\\\s][^\\\\x00]*$'"),
        ({"title": "x" * 201}, "$.title: '" + "x" * 198 + "…"),
        ({"title": "ok", "description": "d" * 4001}, "$.description: '" + "d" * 198 + "…"),
        ({"title": "ok", "team_id": "someone-else"},
         "$: Additional properties are not allowed ('team_id' was unexpected)"),
        ({"title": "ok", "status": "done"},
         "$: Additional properties are not allowed ('status' was unexpected)"),
    ],
)
async def test_task_create_rejects_bad_args(
    db_pool: asyncpg.Pool, args: dict[str, Any], message: str
) -> None:
    team = new_team()
    out = await reply(task_service.service(db_pool), "task.create", args, team)
    assert out == invalid(message)
    assert len(out["error"]["message"]) < 300  # the offending value is never echoed in full
    assert await db_pool.fetchval("SELECT count(*) FROM tasks WHERE team_id = $1", team) == 0


async def test_task_tools_refuse_a_call_without_a_team(db_pool: asyncpg.Pool) -> None:
    with pytest.raises(ToolError, match="no team"):
        await create(db_pool, "", "orphan")
    with pytest.raises(ToolError, match="no team"):
        await tasks(db_pool, "")


# --- data.query (category C) ---------------------------------------------------------------


async def test_query_tasks_by_status(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    done = await create(db_pool, team, "finished")
    await create(db_pool, team, "pending")
    await set_status(db_pool, done["task_id"], "done")
    assert await query(db_pool, team, "tasks_by_status", {"status": "done"}) == {
        "rows": [
            {
                "task_id": done["task_id"],
                "title": "finished",
                "status": "done",
                "created_by": AGENT,
                "created_at": done["created_at"],
            }
        ],
        "row_count": 1,
        "truncated": False,
    }


async def add_usage(
    pool: asyncpg.Pool, day: dt.date, team: str, agent: str, tool: str, n: int
) -> None:
    """A usage_daily row: calls n, invocations n - 1, tokens 10 n, cost n / 4 (exact in binary)."""
    await pool.execute(
        "INSERT INTO usage_daily (day, team_id, agent_id, tool, category, calls, invocations,"
        " tokens_used, cost_1t) VALUES ($1, $2, $3, $4, 'A', $5, $6, $7, $8)",
        *(day, team, agent, tool, n, n - 1, 10 * n, n / 4),
    )


def usage_row(tool: str, calls: int, invocations: int, tokens: int, cost: float) -> dict[str, Any]:
    return {
        "tool": tool,
        "calls": calls,
        "invocations": invocations,
        "tokens_used": tokens,
        "cost_1t": cost,
    }


async def test_query_usage_by_tool_sums_per_tool_for_one_day(db_pool: asyncpg.Pool) -> None:
    team, other = new_team(), new_team()
    day = dt.date(2024, 3, 1)
    await add_usage(db_pool, day, team, "a1", "math", 3)
    await add_usage(db_pool, day, team, "a2", "math", 4)
    await add_usage(db_pool, day, team, "a1", "task.list", 1)
    await add_usage(db_pool, day - dt.timedelta(days=1), team, "a1", "math", 100)
    await add_usage(db_pool, day, other, "a1", "math", 50)

    assert await query(db_pool, team, "usage_by_tool", {"day": "2024-03-01"}) == {
        "rows": [usage_row("math", 7, 5, 70, 1.75), usage_row("task.list", 1, 0, 10, 0.25)],
        "row_count": 2,
        "truncated": False,
    }
    theirs = await query(db_pool, other, "usage_by_tool", {"day": "2024-03-01"})
    assert theirs["rows"] == [usage_row("math", 50, 49, 500, 12.5)]


async def test_query_usage_by_tool_defaults_to_today_utc(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    today = dt.datetime.now(dt.UTC).date()
    await add_usage(db_pool, today, team, "a1", "math", 2)
    await add_usage(db_pool, today - dt.timedelta(days=1), team, "a1", "text", 2)
    for params in (None, {}):
        out = await query(db_pool, team, "usage_by_tool", params)
        assert out["rows"] == [usage_row("math", 2, 1, 20, 0.5)]


async def test_query_never_shows_another_teams_rows(db_pool: asyncpg.Pool) -> None:
    owner, stranger = new_team(), new_team()
    await create(db_pool, owner, "secret")
    await add_usage(db_pool, dt.date(2024, 3, 2), owner, "a1", "math", 5)
    by_status = ("tasks_by_status", {"status": "open"})
    usage = ("usage_by_tool", {"day": "2024-03-02"})
    assert (await query(db_pool, owner, *by_status))["row_count"] == 1
    assert (await query(db_pool, owner, *usage))["row_count"] == 1
    empty = {"rows": [], "row_count": 0, "truncated": False}
    assert await query(db_pool, stranger, *by_status) == empty
    assert await query(db_pool, stranger, *usage) == empty


async def test_query_truncates_at_the_row_limit(db_pool: asyncpg.Pool) -> None:
    team = new_team()
    for title in ("q1", "q2", "q3"):
        await create(db_pool, team, title)
    by_status = ("tasks_by_status", {"status": "open"})
    out = await query(db_pool, team, *by_status, limit=2)
    assert ([r["title"] for r in out["rows"]], out["row_count"], out["truncated"]) == (
        ["q3", "q2"],
        2,
        True,
    )
    out = await query(db_pool, team, *by_status, limit=3)
    assert (out["row_count"], out["truncated"]) == (3, False)
    args = {"query": "tasks_by_status", "params": {"status": "open"}, "limit": 501}
    assert await reply(data_query_service.service(db_pool), "data.query", args, team) == invalid(
        "$.limit: 501 is greater than the maximum of 500"
    )


NAMES = "['files_by_tag', 'projects_by_status', 'tasks_by_status', 'usage_by_tool']"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("drop_tables", f"'drop_tables' is not one of {NAMES}"),
        ("SELECT * FROM tasks", f"'SELECT * FROM tasks' is not one of {NAMES}"),
        (None, "None is not of type 'string'"),
        (7, "7 is not of type 'string'"),
    ],
)
async def test_query_unknown_name_is_invalid_args(
    db_pool: asyncpg.Pool, name: Any, message: str
) -> None:
    args = {"query": name, "params": {}}
    out = await reply(data_query_service.service(db_pool), "data.query", args, new_team())
    assert out == invalid(f"$.query: {message}")


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("tasks_by_status", {}, "$.params: 'status' is a required property"),
        ("tasks_by_status", {"status": "closed"},
         "$.params.status: 'closed' is not one of ['open', 'in_progress', 'done']"),
        ("tasks_by_status", {"status": "open", "team_id": "someone-else"},
         "$.params: Additional properties are not allowed ('team_id' was unexpected)"),
        ("usage_by_tool", {"day": "yesterday"},
         "$.params.day: 'yesterday' does not match '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'"),
        ("usage_by_tool", {"day": "2024-03-01", "tool": "math"},
         "$.params: Additional properties are not allowed ('tool' was unexpected)"),
        ("usage_by_tool", ["2024-03-01"], "$.params: ['2024-03-01'] is not of type 'object'"),
    ],
)
async def test_query_bad_params_are_invalid_args(
    db_pool: asyncpg.Pool, name: str, params: Any, message: str
) -> None:
    args = {"query": name, "params": params}
    out = await reply(data_query_service.service(db_pool), "data.query", args, new_team())
    assert out == invalid(message)


async def test_query_impossible_day_is_a_tool_error(db_pool: asyncpg.Pool) -> None:
    # The pattern admits 2024-02-30; only the handler can tell it is no date.
    message = "^bad params for usage_by_tool: '2024-02-30' is not a date$"
    with pytest.raises(ToolError, match=message):
        await query(db_pool, new_team(), "usage_by_tool", {"day": "2024-02-30"})


@pytest.fixture
def rogue_query(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """Register a query the catalog would never ship, to prove the transaction's guards hold.

    Its name is not in the published schema, so tests call the handler directly.
    """

    def install(sql: str) -> str:
        name = "rogue"
        q = data_query_store.NamedQuery(name, "test only", {"type": "object"}, sql, lambda p: [])
        monkeypatch.setitem(data_query_store.QUERIES, name, q)
        return name

    return install


async def test_query_runs_in_a_read_only_transaction(
    db_pool: asyncpg.Pool, rogue_query: Callable[[str], str]
) -> None:
    team = new_team()
    await create(db_pool, team, "keep me")
    name = rogue_query("DELETE FROM tasks WHERE team_id = $1 AND $2::int > 0 RETURNING task_id")
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        await query(db_pool, team, name, {})
    assert (await tasks(db_pool, team))["count"] == 1


async def test_query_statement_timeout_is_a_tool_error(
    db_pool: asyncpg.Pool, rogue_query: Callable[[str], str]
) -> None:
    name = rogue_query("SELECT pg_sleep(5) WHERE $1::text <> '' AND $2::int > 0")
    started = time.monotonic()
    with pytest.raises(ToolError, match="^query rogue exceeded its 2000 ms time limit$"):
        await query(db_pool, new_team(), name, {})
    assert time.monotonic() - started < 4


# --- greenfood.order (category D) ----------------------------------------------------------


@pytest.fixture
async def product(db_pool: asyncpg.Pool) -> AsyncIterator[str]:
    """A product of our own (price 3.00, stock 10), so the seeded demo inventory stays as is."""
    product_id = f"p_{uuid.uuid4().hex[:12]}"
    await db_pool.execute(
        "INSERT INTO greenfood_products (product_id, name, price, stock)"
        " VALUES ($1, 'Test', 3.00, 10)",
        product_id,
    )
    yield product_id
    await db_pool.execute("DELETE FROM greenfood_orders WHERE product_id = $1", product_id)
    await db_pool.execute("DELETE FROM greenfood_products WHERE product_id = $1", product_id)


async def stock_of(pool: asyncpg.Pool, product_id: str) -> int:
    sql = "SELECT stock FROM greenfood_products WHERE product_id = $1"
    return int(await pool.fetchval(sql, product_id))


async def orders_of(pool: asyncpg.Pool, team: str) -> int:
    sql = "SELECT count(*) FROM greenfood_orders WHERE team_id = $1"
    return int(await pool.fetchval(sql, team))


async def test_get_inventory_lists_the_demo_products(db_pool: asyncpg.Pool, product: str) -> None:
    out = await greenfood(db_pool, new_team(), op="get_inventory")
    by_id = {p["product_id"]: p for p in out["products"]}
    assert {k: (by_id[k]["name"], by_id[k]["price"]) for k in ("apple", "bread", "milk")} == {
        "apple": ("Apple", 0.5),
        "bread": ("Bread", 2.2),
        "milk": ("Milk", 1.1),
    }
    assert by_id[product] == {"product_id": product, "name": "Test", "price": 3.0, "stock": 10}
    assert [p["product_id"] for p in out["products"]] == sorted(by_id)


async def test_create_order_decrements_stock_exactly(db_pool: asyncpg.Pool, product: str) -> None:
    team = new_team()
    out = await greenfood(db_pool, team, op="create_order", product_id=product, qty=4)
    assert set(out) == {"order_id", "status", "product_id", "qty"}
    assert (out["status"], out["product_id"], out["qty"]) == ("created", product, 4)
    assert await stock_of(db_pool, product) == 6
    sql = (
        "SELECT team_id, agent_id, product_id, qty, status FROM greenfood_orders"
        " WHERE order_id = $1"
    )
    order = await db_pool.fetchrow(sql, uuid.UUID(out["order_id"]))
    assert tuple(order) == (team, AGENT, product, 4, "created")
    await greenfood(db_pool, team, op="create_order", product_id=product, qty=6)
    assert await stock_of(db_pool, product) == 0
    assert await orders_of(db_pool, team) == 2


async def test_insufficient_stock_leaves_stock_untouched(
    db_pool: asyncpg.Pool, product: str
) -> None:
    team = new_team()
    with pytest.raises(ToolError, match=f"^insufficient stock: {product} has 10, 11 requested$"):
        await greenfood(db_pool, team, op="create_order", product_id=product, qty=11)
    assert await stock_of(db_pool, product) == 10
    assert await orders_of(db_pool, team) == 0


async def test_concurrent_orders_never_oversell(db_pool: asyncpg.Pool, product: str) -> None:
    results = await asyncio.gather(
        *(
            greenfood(db_pool, new_team(), op="create_order", product_id=product, qty=3)
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(r, dict) for r in results) == 3
    assert sum(isinstance(r, ToolError) for r in results) == 2
    assert await stock_of(db_pool, product) == 1


@pytest.mark.parametrize(
    "args",
    [
        {"op": "create_order", "qty": 1},
        {"op": "set_price", "price": 1},
        {"op": "adjust_stock", "delta": 1},
    ],
)
async def test_unknown_product_is_a_tool_error(db_pool: asyncpg.Pool, args: dict[str, Any]) -> None:
    team = new_team()
    with pytest.raises(ToolError, match="^unknown product 'no_such_product'$"):
        await greenfood(db_pool, team, product_id="no_such_product", **args)
    assert await orders_of(db_pool, team) == 0


async def test_set_price(db_pool: asyncpg.Pool, product: str) -> None:
    team = new_team()
    out = await greenfood(db_pool, team, op="set_price", product_id=product, price=4.25)
    assert out == {"product_id": product, "price": 4.25}
    sql = "SELECT price FROM greenfood_products WHERE product_id = $1"
    assert await db_pool.fetchval(sql, product) == Decimal("4.25")
    with pytest.raises(ToolError, match="^price must have at most two decimal places$"):
        await greenfood(db_pool, team, op="set_price", product_id=product, price=1.234)
    args = {"op": "set_price", "product_id": product, "price": -1}
    assert await reply(greenfood_service.service(db_pool), "greenfood.order", args, team) == (
        invalid("$.price: -1 is less than the minimum of 0")
    )
    assert await db_pool.fetchval(sql, product) == Decimal("4.25")


async def test_adjust_stock_never_goes_below_zero(db_pool: asyncpg.Pool, product: str) -> None:
    team = new_team()
    out = await greenfood(db_pool, team, op="adjust_stock", product_id=product, delta=5)
    assert out == {"product_id": product, "stock": 15}
    out = await greenfood(db_pool, team, op="adjust_stock", product_id=product, delta=-15)
    assert out == {"product_id": product, "stock": 0}
    message = f"^stock of {product} cannot go below 0 \\(would be -1\\)$"
    with pytest.raises(ToolError, match=message):
        await greenfood(db_pool, team, op="adjust_stock", product_id=product, delta=-1)
    assert await stock_of(db_pool, product) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"op": "get_inventory", "price": 1},
         "$: Additional properties are not allowed ('price' was unexpected)"),
        ({"op": "create_order", "product_id": "apple", "qty": 0},
         "$.qty: 0 is less than the minimum of 1"),
        ({"op": "create_order", "product_id": "apple", "qty": 1001},
         "$.qty: 1001 is greater than the maximum of 1000"),
        ({"op": "create_order", "product_id": "Apple!", "qty": 1},
         "$.product_id: 'Apple!' does not match '^[a-z][a-z0-9_-]{0,63}$'"),
        ({"op": "create_order", "product_id": "apple"}, "$: 'qty' is a required property"),
        ({"op": "delete_everything"}, "$.op: 'delete_everything' is not one of "
         "['create_order', 'get_inventory', 'set_price', 'adjust_stock']"),
        ({}, "$: 'op' is a required property"),
    ],
)
async def test_greenfood_rejects_bad_args(
    db_pool: asyncpg.Pool, args: dict[str, Any], message: str
) -> None:
    before = await stock_of(db_pool, "apple")
    svc = greenfood_service.service(db_pool)
    assert await reply(svc, "greenfood.order", args, new_team()) == invalid(message)
    assert await stock_of(db_pool, "apple") == before


# --- manifests --------------------------------------------------------------------------------

GOOD_AND_BAD_ARGS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    "task.list": (
        [{}, {"status": "done"}, {"status": "open", "limit": 100}],
        [{"status": "closed"}, {"limit": 0}, {"limit": 101}, {"team_id": "x"}],
    ),
    "task.create": (
        [{"title": "t"}, {"title": "t", "description": "d"}],
        [
            {},
            {"title": ""},
            {"title": "x" * 201},
            {"title": "t", "description": "d" * 4001},
            {"title": "t", "created_by": "x"},
        ],
    ),
    "data.query": (
        [
            {"query": "tasks_by_status", "params": {"status": "open"}},
            {"query": "usage_by_tool"},
            {"query": "usage_by_tool", "params": {"day": "2024-03-01"}, "limit": 500},
        ],
        [
            {"query": "raw_sql", "params": {}},
            {"query": "tasks_by_status"},
            {"query": "tasks_by_status", "params": {"status": "open", "team_id": "x"}},
            {"query": "usage_by_tool", "params": {"day": "today"}},
            {"query": "usage_by_tool", "limit": 501},
            {"query": "usage_by_tool", "sql": "SELECT 1"},
        ],
    ),
    "greenfood.order": (
        [
            {"op": "create_order", "product_id": "apple", "qty": 1},
            {"op": "get_inventory"},
            {"op": "set_price", "product_id": "milk", "price": 1.25},
            {"op": "adjust_stock", "product_id": "bread", "delta": -5},
        ],
        [
            {"op": "get_inventory", "price": 1},
            {"op": "create_order", "product_id": "apple", "qty": 1, "price": 0},
            {"op": "create_order", "product_id": "apple", "delta": 1},
            {"op": "create_order", "product_id": "Apple", "qty": 1},
            {"op": "create_order", "product_id": "apple", "qty": 1001},
            {"op": "set_price", "product_id": "milk"},
            {"op": "refund"},
            {"product_id": "apple", "qty": 1},
        ],
    ),
}


def all_manifests(pool: asyncpg.Pool) -> dict[str, ToolManifest]:
    modules = (task_service, data_query_service, greenfood_service)
    return {m.tool_id: m for module in modules for m in module.service(pool).manifests}


def test_manifests_are_classified_as_designed(db_pool: asyncpg.Pool) -> None:
    manifests = all_manifests(db_pool)
    summary = {
        name: (m.category, m.action, m.requires_approval, m.network, m.timeout_ms, m.capability)
        for name, m in manifests.items()
    }
    assert summary == {
        "task.list": ("B", "read", False, False, 3000, "tool.task.list.invoke"),
        "task.create": ("B", "write", False, False, 3000, "tool.task.create.invoke"),
        "task.get": ("B", "read", False, False, 3000, "tool.task.get.invoke"),
        "task.update": ("B", "write", False, False, 3000, "tool.task.update.invoke"),
        "task.complete": ("B", "write", False, False, 3000, "tool.task.complete.invoke"),
        "task.assign": ("B", "write", False, False, 3000, "tool.task.assign.invoke"),
        "data.query": ("C", "read", False, False, 3000, "tool.data.query.invoke"),
        "greenfood.order": ("D", "write", True, False, 5000, "tool.greenfood.order.invoke"),
    }
    assert all(m.cost.per_call > 0 for m in manifests.values())


@pytest.mark.parametrize("tool_id", sorted(GOOD_AND_BAD_ARGS))
def test_input_schemas_accept_examples_and_reject_mixed_shapes(
    db_pool: asyncpg.Pool, tool_id: str
) -> None:
    validator = Draft202012Validator(all_manifests(db_pool)[tool_id].input_schema)
    good, bad = GOOD_AND_BAD_ARGS[tool_id]
    for args in good:
        assert validator.is_valid(args), args
    for args in bad:
        assert not validator.is_valid(args), args
