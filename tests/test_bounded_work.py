"""Work per call is bounded before it is spent (issue 10 §4): bounded schemas, the args-size
bound before validation, validation that stops early, and fairness between teams at a service."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from proxy.web import keys as appkeys
from proxy.core.args.checker import ArgsChecker
from proxy.core.errors import InvalidArgs
from services.builtin import builtin_services
from services.sdk import CATEGORIES, CallContext, Service, tool
from wire.bounds import first_error, max_json_bytes, size_first, unbounded
from services.sdk.fairness import TeamSlots
from services.sdk.service import make_manifest
from tests.support.calls import bearer, invoke

# --- schemas ----------------------------------------------------------------------------------


def test_every_builtin_input_schema_is_bounded() -> None:
    manifests = [m for s in builtin_services(None) for m in s.manifests]  # type: ignore[arg-type]
    assert len(manifests) >= 9
    for m in manifests:
        assert unbounded(m.input_schema) == [], m.tool_id
        derived = max_json_bytes(m.input_schema)
        assert m.max_args_bytes is not None and m.max_args_bytes > 0, m.tool_id  # may exceed the body limit
        if "$defs" in m.input_schema:  # references are not sized: the category's default
            assert derived is None and m.max_args_bytes == CATEGORIES[m.category].max_args_bytes
        else:
            assert derived is not None and derived > 0, m.tool_id


def test_unbounded_names_what_may_grow() -> None:
    schema = {"type": "object", "properties": {
        "s": {"type": "string"}, "a": {"type": "array", "items": {"type": "integer"}},
        "o": {"type": "object"}, "any": {}, "ok": {"enum": ["x", "y"]}}}
    found = unbounded(schema)
    for where in ("$.s: a string", "$.a: an array", "$.o: an object open", "$.any: a value",
                  "$: an object open"):
        assert any(f.startswith(where) for f in found), (where, found)
    assert not any(f.startswith("$.ok") for f in found)
    assert max_json_bytes(schema) is None


def test_max_json_bytes_is_an_upper_bound() -> None:
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "name": {"type": "string", "maxLength": 4},
        "tags": {"type": "array", "maxItems": 3, "items": {"enum": ["a", "bb"]}},
        "n": {"type": "integer", "minimum": -5, "maximum": 100}}}
    bound = max_json_bytes(schema)
    assert bound is not None
    worst = {"name": "\u0001" * 4, "tags": ["bb", "bb", "bb"], "n": 100.0}
    assert Draft202012Validator(schema).is_valid(worst)
    assert len(orjson.dumps(worst)) <= bound


def test_a_category_default_where_the_schema_bounds_nothing() -> None:
    loose = make_manifest({"tool_id": "loose.tool", "category": "B", "action": "read",
                           "description": "d", "input_schema": {"type": "object"}})
    assert loose.max_args_bytes == 256 << 10
    explicit = make_manifest({"tool_id": "big.tool", "category": "A", "action": "read",
                              "description": "d", "input_schema": {"type": "object"},
                              "max_args_bytes": 4096})
    assert explicit.max_args_bytes == 4096


def test_size_errors_are_found_before_any_item_is_looked_at() -> None:
    schema = {"type": "object", "properties": {"xs": {
        "type": "array", "items": {"type": "string", "pattern": "^[0-9]+$"}, "maxItems": 10}}}
    items = ["x"] * 50_000
    errors = Draft202012Validator(size_first(schema)).iter_errors({"xs": items})
    assert next(errors).validator == "maxItems"  # before the first item's pattern
    error = first_error(Draft202012Validator(size_first(schema)), {"xs": items})
    assert error is not None and error.validator == "maxItems"
    # In its written order the schema looks at every item first: one error per item.
    assert next(Draft202012Validator(schema).iter_errors({"xs": items})).validator == "pattern"


def test_the_size_bound_comes_before_the_schema() -> None:
    m = make_manifest({"tool_id": "sized.tool", "category": "A", "action": "read",
                       "description": "d", "max_args_bytes": 100,
                       "input_schema": {"type": "object", "additionalProperties": False,
                                        "properties": {"x": {"type": "string", "maxLength": 1000}}}})
    checker = ArgsChecker(m)
    checker.check({"x": "a" * 50})
    checker.check({"x": "a" * 50}, body_bytes=90)  # a small body is not even measured
    with pytest.raises(InvalidArgs, match="exceed sized.tool's bound of 100 bytes"):
        checker.check({"x": "a" * 200}, body_bytes=300)
    with pytest.raises(InvalidArgs, match="input schema"):
        checker.check({"y": 1})


async def test_a_huge_holiday_list_is_refused_by_its_size(client, token, team) -> None:
    holidays = [f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(60_000)]
    status, body = await invoke(client, token(team=team), "calendar", {
        "op": "business_days", "start": "2026-01-01", "end": "2026-12-31", "holidays": holidays})
    assert status == 400 and body["error"]["code"] == "invalid_args"
    assert "bound of" in body["error"]["message"] and "bytes" in body["error"]["message"]
    # Within the size bound but over maxItems: the schema's own bound names it.
    status, body = await invoke(client, token(team=team), "calendar", {
        "op": "business_days", "start": "2026-01-01", "end": "2026-12-31",
        "holidays": holidays[:1001]})
    assert status == 400 and "fails maxItems 1000" in body["error"]["message"], body
    status, body = await invoke(client, token(team=team), "calendar", {
        "op": "business_days", "start": "2026-01-05", "end": "2026-01-10",
        "holidays": holidays[:1000]})
    assert status == 200, body


# --- fairness at a service --------------------------------------------------------------------


def test_team_slots_share_a_service() -> None:
    slots = TeamSlots(capacity=4, per_team=2, queued_per_team=1)
    assert [slots.admit("a") for _ in range(4)] == [True, True, True, False]
    assert slots.admit("b") is True
    with pytest.raises(ValueError):
        TeamSlots(capacity=2, per_team=3, queued_per_team=0)


async def test_team_slots_are_given_back_however_a_call_leaves() -> None:
    """A call that ran, one whose body raised, one that timed out waiting and one cancelled
    while waiting all give back what they held: the team is forgotten once none of its calls is
    left, and every slot is free again."""
    slots = TeamSlots(capacity=2, per_team=1, queued_per_team=3)
    assert slots.admit("a") and slots.admit("a") and slots.admit("a") and slots.admit("b")
    entered = asyncio.Event()
    leave = asyncio.Event()

    async def runs() -> None:
        async with slots.slot("a"):
            assert slots.running("a") == 1
            entered.set()
            await leave.wait()

    first = asyncio.create_task(runs())
    await entered.wait()
    with pytest.raises(TimeoutError):  # the team's one slot is taken
        async with slots.slot("a", timeout=0.05):
            raise AssertionError("ran without a slot")
    waiting = asyncio.create_task(runs())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with pytest.raises(RuntimeError):  # another team's call runs beside it, and fails
        async with slots.slot("b", timeout=1):
            assert slots.running("b") == 1
            raise RuntimeError("the tool failed")
    assert slots.teams == 1 and slots.running("a") == 1 and slots.running("b") == 0
    leave.set()
    await first
    assert slots.teams == 0 and slots.running("a") == 0
    assert slots.admit("a") and slots.admit("b")  # both slots free: neither call waits
    async with slots.slot("a", timeout=0), slots.slot("b", timeout=0):
        assert slots.running("a") == slots.running("b") == 1
    assert slots.teams == 0


release = asyncio.Event()
held: list[str] = []


@tool(tool_id="fairsvc.hold", category="A", action="read",
      description="Holds until released (hold: true), else answers at once.",
      input_schema={"type": "object", "additionalProperties": False,
                    "properties": {"hold": {"type": "boolean"}}},
      output_schema={"type": "object", "additionalProperties": False,
                     "properties": {"team": {"type": "string"}}})
async def hold_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    if args.get("hold"):
        held.append(ctx.team_id)
        await release.wait()
    return {"team": ctx.team_id}


@pytest.fixture
async def fair_service(client: Any, nats_url: str) -> Any:
    from infra.bus import close, connect

    nc = await connect(nats_url, name="test-fairsvc")
    svc = Service(name="fairsvc", tools=[hold_tool], heartbeat_s=0.5, max_concurrency=4,
                  per_team_concurrency=2, max_queued_per_team=2)
    await svc.start(nc)
    await client.app[appkeys.CATALOG].wait_available(["fairsvc.hold"], timeout=10)
    release.clear()
    held.clear()
    try:
        yield svc
    finally:
        release.set()
        await svc.stop()
        await close(nc)


async def test_another_team_is_served_while_one_team_saturates_a_service(
        client, token, team, fair_service) -> None:
    greedy, other = team, f"{team}_other"
    tok_greedy = token(agent="g", team=greedy)

    async def call(tok: str, hold: bool) -> tuple[int, dict[str, Any]]:
        r = await client.post("/v1/tools/invoke", json={"tool": "fairsvc.hold", "args": {"hold": hold}},
                              headers=bearer(tok))
        return r.status, await r.json()

    greedy_calls = [asyncio.create_task(call(tok_greedy, True)) for _ in range(6)]
    async with asyncio.timeout(5):
        while len(held) < 2:  # the greedy team's share is running, its others wait or bounce
            await asyncio.sleep(0.01)
    # Two more wait for the team's slots; the last two are refused at once (nothing ran).
    bounced = []
    async with asyncio.timeout(5):
        while len(bounced) < 2:
            bounced = [t for t in greedy_calls if t.done()]
            await asyncio.sleep(0.01)
    for t in bounced:
        status, body = t.result()
        assert status == 503 and body["error"]["code"] == "tool_busy", body
        assert body["status"] == "UNAVAILABLE"

    status, body = await call(token(agent="o", team=other), False)  # while the greedy hold on
    assert status == 200 and body["output"] == {"team": other}, body
    assert fair_service._slots.running(greedy) == 2 and not release.is_set()

    release.set()
    results = await asyncio.gather(*greedy_calls)
    assert sorted(r[0] for r in results) == [200, 200, 200, 200, 503, 503]
    assert held == [greedy] * 4


async def test_cpu_workers_leave_with_their_service(nats_url: str) -> None:
    """A service's worker processes end when it stops, and when its process dies unannounced."""
    import signal
    import subprocess
    import sys

    script = (
        "import asyncio, os, sys\n"
        "from infra.bus import connect\n"
        "from services.memory.service import service\n"
        "async def main():\n"
        "    nc = await connect(sys.argv[1], name='cpu-worker-test')\n"
        "    s = service(); await s.start(nc)\n"
        "    await asyncio.get_running_loop().run_in_executor(s._executor, os.getpid)\n"
        "    print(' '.join(str(p) for p in s._executor._processes), flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n")
    child = subprocess.Popen([sys.executable, "-c", script, nats_url], stdout=subprocess.PIPE,
                             text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30)  # type: ignore[union-attr]
        workers = [int(p) for p in line.split()]
        assert workers and all(_alive(p) for p in workers)
    finally:
        child.send_signal(signal.SIGKILL)  # no stop(): the workers must notice by themselves
        child.wait(10)
    async with asyncio.timeout(10):
        while any(_alive(p) for p in workers):
            await asyncio.sleep(0.1)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
