"""One matrix, every surface: the same case through the native route, MCP over streamable HTTP
(both protocol eras), MCP over stdio (`toolproxy mcp-stdio`) and the OpenAI surface must end
with the same decision, the same usage row, and the same effect on services (none, where the
call was refused). The MCP clients are the official SDK's; the OpenAI calls are built with the
`openai` package's types."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from mcp.shared.exceptions import MCPError

from proxy.core.notices import RESUME_TOOL
from proxy.core.tool_names import to_openai
from tests.support import fixture_services
from tests.support.calls import bearer, grant, invoke
from tests.support.mcp_client import base_url, mcp_http, mcp_stdio, mcp_url
from tests.support.openai_calls import assistant, post_calls, tool_call

SURFACES = ("native", "mcp-http-2025-11-25", "mcp-http-2026-07-28", "mcp-stdio", "openai")


@dataclass(frozen=True)
class Seen:
    """A call's outcome as any surface reports it, reduced to what must agree."""

    status: str | None  # COMPLETED, FAILED, DENIED, AUTHORIZATION_REQUIRED; None: no call made
    code: str | None
    output: Any = None
    reasons: tuple[str, ...] = ()
    call_id: str | None = None
    tool_code: str | None = None  # a tool error's own code

    @staticmethod
    def of(body: dict[str, Any]) -> Seen:
        error = body.get("error") or {}
        return Seen(body.get("status"), error.get("code"), body.get("output"),
                    tuple(error.get("reasons") or ()), body.get("call_id"), error.get("tool_code"))

    def agreed(self) -> tuple[Any, ...]:
        return (self.status, self.code, self.output, self.reasons)


Call = Callable[[str, dict[str, Any]], Awaitable[Seen]]


class Surface:
    """Calls a tool (or resumes a held call) the way a client of that surface does."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def resume(self, call_id: str) -> Seen:
        return await self.call(RESUME_TOOL, {"call_id": call_id})


def _mcp_call(c: Any) -> Call:
    async def call(tool: str, args: dict[str, Any]) -> Seen:
        try:
            result = await c.call_tool(tool, args)
        except MCPError as exc:  # only a tool that cannot be found or named
            return Seen(None, (exc.error.data or {}).get("code"))
        if result.is_error:
            return Seen.of((result.meta or {})["toolproxy/error"])
        meta = result.meta or {}
        return Seen("COMPLETED", None, result.structured_content, (), meta.get("toolproxy/call_id"))
    return call


def _made(http_status: int, seen: Seen) -> Seen:
    """A 400 or 404 without a call_id was refused before a call existed (bad name, bad args);
    a tool's own not_found (404) is a call that ran."""
    return Seen(None, seen.code) if http_status in (400, 404) and seen.call_id is None else seen


@contextlib.asynccontextmanager
async def surface(name: str, client: Any, tok: str) -> AsyncIterator[Surface]:
    if name == "native":
        async def native(tool: str, args: dict[str, Any]) -> Seen:
            if tool == RESUME_TOOL:
                r = await client.post(f"/v1/calls/{args['call_id']}/resume", headers=bearer(tok))
                return Seen.of(await r.json())
            status, body = await invoke(client, tok, tool, args)
            return _made(status, Seen.of(body))
        yield Surface(native)
    elif name.startswith("mcp-http"):
        mode = "legacy" if name.endswith("2025-11-25") else "auto"
        async with mcp_http(mcp_url(client), tok, mode) as c:
            assert c.session.protocol_version == name.removeprefix("mcp-http-")
            yield Surface(_mcp_call(c))
    elif name == "mcp-stdio":
        async with mcp_stdio(base_url(client), tok, "legacy") as c:
            yield Surface(_mcp_call(c))
    else:
        async def openai(tool: str, args: dict[str, Any]) -> Seen:
            name = tool if tool == RESUME_TOOL else to_openai(tool)
            status, body = await post_calls(client, tok, assistant(tool_call(name, args)))
            assert status == 200, body
            (message,), (result,) = body["messages"], body["results"]
            content = orjson.loads(message["content"])
            seen = Seen.of(result["body"])
            assert (content if seen.status == "COMPLETED" else content.get("error")) == (
                seen.output if seen.status == "COMPLETED" else result["body"]["error"])
            return _made(result["http_status"], seen)
        yield Surface(openai)


async def usage_row(db_pool: Any, call_id: str | None, timeout: float = 10.0) -> tuple[Any, ...] | None:
    """The call's usage row, reduced to what must agree (ids and timings differ)."""
    if call_id is None:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        row = await db_pool.fetchrow("SELECT * FROM usage_records WHERE call_id = $1", uuid.UUID(call_id))
        if row is not None:
            return (row["tool"], row["category"], row["action"], row["decision"], row["status"],
                    row["error_code"], row["http_status"])
        if loop.time() > deadline:
            return ("missing",)
        await asyncio.sleep(0.05)


async def decision_results(db_pool: Any, call_id: str | None) -> list[str]:
    if call_id is None:
        return []
    await asyncio.sleep(0)  # records are journaled before the answer; read until present
    for _ in range(200):
        rows = await db_pool.fetch("SELECT result FROM decisions WHERE call_id = $1 AND phase = 'call' "
                                   "ORDER BY time", uuid.UUID(call_id))
        if rows:
            return [r["result"] for r in rows]
        await asyncio.sleep(0.05)
    return []


# --- the cases ------------------------------------------------------------------------------

@dataclass
class Case:
    tool: str
    args: dict[str, Any]
    expect: Seen
    setup: Callable[..., Awaitable[None]] | None = None
    calls_before: int = 0  # identical calls made first (the rate limit case)
    reaches_service: bool = True


async def _grant_guarded(client: Any, token: Any, team: str, agent: str) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke", agent_id=agent)


async def _rate_one_per_minute(client: Any, token: Any, team: str, agent: str) -> None:
    gov = bearer(token(agent="gov", team=team, role="governance"))
    r = await client.post("/v1/admin/overrides", headers=gov, json={
        "team_id": team, "agent_id": agent, "tool": "math", "effect": "allow", "rate_per_minute": 1})
    assert r.status == 201, await r.text()


async def _grant_template_update(client: Any, token: Any, team: str, agent: str) -> None:
    await grant(client, token, team, "tool.template.update.invoke", agent_id=agent)


NO_TEMPLATE = "00000000-0000-4000-8000-000000000000"
TEMPLATE = {"name": "t", "content_md": "# t", "default_profile_id": "p"}

CASES = {
    "allowed": Case("math", {"expr": "2+3*4"}, Seen("COMPLETED", None, {"value": 14})),
    "tool_error": Case("testsvc.fail", {}, Seen("FAILED", "tool_error")),
    "policy_denial": Case("task.list", {}, Seen("DENIED", "denied", None, ("grant_required",)),
                          reaches_service=False),
    "write_denied_by_default": Case("task.create", {"title": "nope"},
                                    Seen("DENIED", "denied", None, ("grant_required",)),
                                    reaches_service=False),
    "rate_limit": Case("math", {"expr": "1+1"}, Seen("DENIED", "rate_limited", None, ("agent_tool_rate",)),
                       setup=_rate_one_per_minute, calls_before=1, reaches_service=False),
    "unknown_tool": Case("no.such.tool", {}, Seen(None, "unknown_tool"), reaches_service=False),
    "bad_args": Case("math", {"expr": 42}, Seen(None, "invalid_args"), reaches_service=False),
    # Agent templates (seed 001): read by default, each write by its own grant.
    "template_list_without_grant": Case("template.list", {},
                                        Seen("COMPLETED", None, {"templates": [], "count": 0})),
    "template_create_denied_by_default": Case("template.create", TEMPLATE,
                                              Seen("DENIED", "denied", None, ("grant_required",)),
                                              reaches_service=False),
    "template_update_denied_by_default": Case(
        "template.update", {"template_id": NO_TEMPLATE, "content_md": "# x"},
        Seen("DENIED", "denied", None, ("grant_required",)), reaches_service=False),
    "template_delete_denied_by_default": Case("template.delete", {"template_id": NO_TEMPLATE},
                                              Seen("DENIED", "denied", None, ("grant_required",)),
                                              reaches_service=False),
    "template_update_grant_does_not_allow_delete": Case(
        "template.delete", {"template_id": NO_TEMPLATE},
        Seen("DENIED", "denied", None, ("grant_required",)),
        setup=_grant_template_update, reaches_service=False),
    "template_update_grant_does_not_allow_create": Case(
        "template.create", TEMPLATE, Seen("DENIED", "denied", None, ("grant_required",)),
        setup=_grant_template_update, reaches_service=False),
    "template_update_granted_reaches_the_tool": Case(
        "template.update", {"template_id": NO_TEMPLATE, "content_md": "# x"},
        Seen("FAILED", "tool_error"), setup=_grant_template_update),
    "template_bad_args": Case("template.create", {**TEMPLATE, "name": ""},
                              Seen(None, "invalid_args"), reaches_service=False),
}


@pytest.mark.parametrize("case_name", list(CASES))
async def test_same_outcome_on_every_surface(case_name, client, token, team, db_pool, bus_spy) -> None:
    case = CASES[case_name]
    observed: dict[str, tuple[Any, ...]] = {}
    for name in SURFACES:
        agent = f"p-{name}"  # one agent per surface: rate buckets and grants stay apart
        if case.setup is not None:
            await case.setup(client, token, team, agent)
            await asyncio.sleep(0.3)
        async with surface(name, client, token(agent=agent, team=team)) as s:
            for _ in range(case.calls_before):
                assert (await s.call(case.tool, case.args)).status == "COMPLETED"
            await bus_spy.settle()
            bus_spy.subjects.clear()
            seen = await s.call(case.tool, case.args)
            await bus_spy.settle()
        assert seen.agreed() == case.expect.agreed(), (name, seen)
        reached = [x for x in bus_spy.subjects if x.endswith(".invoke")]
        assert bool(reached) == case.reaches_service, (name, bus_spy.subjects)
        observed[name] = (seen.agreed(), await usage_row(db_pool, seen.call_id),
                          tuple(await decision_results(db_pool, seen.call_id)))
    assert all(v == observed["native"] for v in observed.values()), observed
    _, usage, decisions = observed["native"]
    if case.expect.status is None:  # refused before a call existed: no row, no decision
        assert (usage, decisions) == (None, ()), observed
    else:
        assert usage is not None and usage != ("missing",) and usage[4] == case.expect.status
        assert decisions and decisions[-1] == ("allow" if case.expect.code != "denied" else "deny")


async def test_approval_then_resume_on_every_surface(client, token, team, db_pool) -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    observed = {}
    for name in SURFACES:
        agent = f"p-{name}"
        await _grant_guarded(client, token, team, agent)
        await asyncio.sleep(0.3)
        async with surface(name, client, token(agent=agent, team=team)) as s:
            held = await s.call("testsvc.guarded", {"amount": 7})
            assert held.status == "AUTHORIZATION_REQUIRED", (name, held)
            assert held.code == "authorization_required" and held.call_id
            waiting = await s.resume(held.call_id)
            assert waiting.status == "AUTHORIZATION_REQUIRED", (name, waiting)
            approval_id = await db_pool.fetchval("SELECT approval_id FROM approvals WHERE call_id = $1",
                                                 uuid.UUID(held.call_id))
            r = await client.post(f"/v1/approvals/{approval_id}/decision",
                                  json={"decision": "approve"}, headers=bearer(gov))
            assert r.status == 200
            fixture_services.guarded_calls.clear()
            done = await s.resume(held.call_id)
            again = await s.resume(held.call_id)
        assert done.agreed() == ("COMPLETED", None, {"done": 7}, ()), (name, done)
        assert again.agreed() == done.agreed()
        assert fixture_services.guarded_calls == [{"call_id": held.call_id, "amount": 7}], name
        observed[name] = (held.agreed(), done.agreed(), await usage_row(db_pool, held.call_id),
                          tuple(await decision_results(db_pool, held.call_id)))
    assert all(v == observed["native"] for v in observed.values()), observed
    usage, decisions = observed["native"][2:]
    assert usage[4] == "COMPLETED" and decisions[-1] == "allow"


async def test_same_events_on_every_surface(client, token, team) -> None:
    r = await client.get("/v1/events", headers=bearer(token(team=team)))
    if r.status == 404:
        pytest.skip("events land with the lifecycle issue: /v1/events does not exist yet")
    observed = {}
    for name in SURFACES:
        tok = token(agent=f"p-{name}", team=team)
        async with surface(name, client, tok) as s:
            seen = await s.call("math", {"expr": "1+2"})
        for _ in range(200):  # events follow the response within a bound (the journal writer)
            r = await client.get("/v1/events", params={"cursor": "0", "limit": "1000"},
                                 headers=bearer(tok))
            events = [e for e in (await r.json())["events"] if e.get("call_id") == seen.call_id]
            observed[name] = tuple(e["type"] for e in events)
            if observed[name][-1:] in (("agent.tool.completed",), ("agent.error",)):
                break
            await asyncio.sleep(0.05)
        assert observed[name], name
    assert all(v == observed["native"] for v in observed.values()), observed


async def test_template_grants_have_the_same_effect_on_every_surface(client, token, team,
                                                                       db_pool) -> None:
    """Seed 001 on each surface: with a grant for template.update only, an agent lists, reads
    and updates; create and delete are refused before any effect."""
    await grant(client, token, team, "tool.template.create.invoke", agent_id="seeder")
    await asyncio.sleep(0.3)
    seeder = token(agent="seeder", team=team)
    ids = {}
    for name in SURFACES:
        status, body = await invoke(client, seeder, "template.create", {**TEMPLATE, "name": name})
        assert status == 200, body
        ids[name] = body["output"]["template_id"]
    for name in SURFACES:
        await _grant_template_update(client, token, team, f"p-{name}")
    await asyncio.sleep(0.3)

    async def effect(name: str) -> tuple[int, int, str]:
        row = await db_pool.fetchrow("SELECT version, content_md FROM templates WHERE template_id = $1",
                                     uuid.UUID(ids[name]))
        total = await db_pool.fetchval("SELECT count(*) FROM templates WHERE team_id = $1", team)
        return total, row["version"], row["content_md"]

    observed = {}
    for name in SURFACES:
        tid = ids[name]
        async with surface(name, client, token(agent=f"p-{name}", team=team)) as s:
            listed = await s.call("template.list", {})
            created = await s.call("template.create", {**TEMPLATE, "name": f"{name}-2"})
            deleted = await s.call("template.delete", {"template_id": tid})
            after_refusals = await effect(name)
            edited = await s.call("template.update", {"template_id": tid, "content_md": "# v2",
                                                      "expected_version": 1})
            stale = await s.call("template.update", {"template_id": tid, "content_md": "# v3",
                                                     "expected_version": 1})
            read = await s.call("template.read", {"template_id": tid})
        assert listed.status == "COMPLETED" and listed.output["count"] == len(SURFACES), (name, listed)
        assert after_refusals == (len(SURFACES), 1, "# t"), name
        assert (edited.output["version"], edited.output["content_md"]) == (2, "# v2"), (name, edited)
        assert (read.output["version"], read.output["content_md"]) == (2, "# v2"), (name, read)
        observed[name] = ([(c.status, c.code, c.reasons, c.tool_code) for c in
                           (listed, created, deleted, edited, stale, read)], await effect(name))
    denied = ("DENIED", "denied", ("grant_required",), None)
    assert observed["native"] == ([
        ("COMPLETED", None, (), None), denied, denied, ("COMPLETED", None, (), None),
        ("FAILED", "tool_error", (), "version_conflict"), ("COMPLETED", None, (), None)],
        (len(SURFACES), 2, "# v2"))
    assert all(v == observed["native"] for v in observed.values()), observed
