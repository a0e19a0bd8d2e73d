"""agent.invoke through the whole pipeline, with small registered test agents serving
`agents.<id>.invoke` on the session's NATS. Each agent makes its own tool calls through the
proxy with its own token, exactly as a real agent runtime would."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import nats as nats_client
import pytest

from services.agents.protocol import AgentReply, AgentRequest, AgentUsage
from services.agents.runtime import AgentError, AgentRuntime
from tests.support.c_helpers import granted, override, tighten_timeout, tool_code
from tests.support.calls import bearer, grant, invoke
from tests.support.cli_command import cli

SHORT = {"type": "string", "maxLength": 200}
SCHEMAS: dict[str, dict[str, Any]] = {
    "echo": {"type": "object", "additionalProperties": False,
             "properties": {"text": {"type": "string", "maxLength": 100},
                            "report_tokens": {"type": "integer", "minimum": 0, "maximum": 1000}}},
    "actor": {"type": "object", "additionalProperties": False, "required": ["tool"],
              "properties": {"tool": {"type": "string", "maxLength": 64},
                             "args": {"type": "object", "maxProperties": 8, "additionalProperties": {
                                 "anyOf": [SHORT, {"type": "integer"},
                                           {"type": "object", "additionalProperties": False}]}}}},
    "relay": {"type": "object", "additionalProperties": False,
              "properties": {"next": {"type": "array", "maxItems": 8, "items": SHORT}}},
    "slow": {"type": "object", "additionalProperties": False},
    "broken": {"type": "object", "additionalProperties": False},
}


class TestAgents:
    """One team's test agents: echo, actor (makes one tool call as itself), relays r1..r3
    (invoke the next agent of `next` on behalf of their invocation), slow, broken."""

    __test__ = False

    def __init__(self, team: str, proxy_url: str, mint: Callable[..., str]) -> None:
        self.team, self._url, self._mint = team, proxy_url, mint
        self._nc: Any = None
        self._http: aiohttp.ClientSession | None = None
        self._runtimes: list[AgentRuntime] = []
        self.seen: list[AgentRequest] = []

    def id(self, name: str) -> str:
        return f"{name}-{self.team}"

    async def start(self, nats_url: str) -> None:
        self._nc = await nats_client.connect(nats_url)
        self._http = aiohttp.ClientSession()
        handlers = {"echo": self._echo, "actor": self._actor, "r1": self._relay, "r2": self._relay,
                    "r3": self._relay, "slow": self._slow, "broken": self._broken}
        for name, handler in handlers.items():
            me = self.id(name)  # a runtime knows who it is: it serves that agent's subject
            runtime = AgentRuntime(me, lambda request, h=handler, me=me: h(me, request))
            await runtime.start(self._nc)
            self._runtimes.append(runtime)

    async def stop(self) -> None:
        for runtime in self._runtimes:
            await runtime.stop()
        if self._http is not None:
            await self._http.close()
        if self._nc is not None:
            await self._nc.close()

    async def call(self, me: str, request: AgentRequest, tool: str,
                   args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A tool call as agent `me` (its own token), charged to the caller's run."""
        assert self._http is not None
        tok = self._mint(agent=me, team=request.team_id)
        body = {"tool": tool, "args": args, "context": {"agent_run_id": request.run_id}}
        async with self._http.post(f"{self._url}/v1/tools/invoke", json=body, headers=bearer(tok)) as r:
            return r.status, await r.json()

    async def _echo(self, me: str, request: AgentRequest) -> AgentReply:
        self.seen.append(request)
        output = {"input": request.input, "chain": request.chain, "depth": request.depth,
                  "caller": request.caller, "run_id": request.run_id}
        return AgentReply(ok=True, output=output,
                          usage=AgentUsage(tokens=int(request.input.get("report_tokens", 0))))

    async def _actor(self, me: str, request: AgentRequest) -> dict[str, Any]:
        status, body = await self.call(me, request, request.input["tool"], request.input.get("args", {}))
        return {"status": status, "code": body.get("error", {}).get("code"),
                "tool_code": tool_code(body), "tokens_used": body.get("tokens_used")}

    async def _relay(self, me: str, request: AgentRequest) -> dict[str, Any]:
        out: dict[str, Any] = {"depth": request.depth, "chain": request.chain}
        rest = request.input.get("next", [])
        if rest:
            status, body = await self.call(me, request, "agent.invoke", {
                "agent_id": rest[0], "input": {"next": rest[1:]} if rest[0].startswith("r") else {},
                "invocation_id": request.invocation_id})
            out.update(status=status, tool_code=tool_code(body),
                       inner=body.get("output", {}).get("output"))
        return out

    async def _slow(self, me: str, request: AgentRequest) -> dict[str, Any]:
        await asyncio.sleep(3)
        return {}

    async def _broken(self, me: str, request: AgentRequest) -> dict[str, Any]:
        if request.input:
            raise AgentError("broken_on_purpose", "asked to fail")
        return {"text": "nul \u0000 inside"}


@pytest.fixture
async def agents(client, token, team, nats_url) -> AsyncIterator[TestAgents]:
    world = TestAgents(team, str(client.make_url("")).rstrip("/"), token)
    await world.start(nats_url)
    admin = token(agent="root", team="ops", role="admin")
    for name in ("echo", "actor", "r1", "r2", "r3", "slow", "broken", "offline"):
        schema = SCHEMAS["relay" if name.startswith("r") else name if name in SCHEMAS else "slow"]
        r = await client.post("/v1/admin/agents", headers=bearer(admin), json={
            "agent_id": world.id(name), "team_id": team, "description": f"test agent {name}",
            "input_schema": schema})
        assert r.status == 201, await r.text()
    yield world
    await world.stop()


async def invoker(client: Any, token: Any, team: str) -> str:
    """agent-1 may invoke agents (more often than category C's default rate); so may every
    agent of the team (a team-wide grant)."""
    await grant(client, token, team, "tool.agent.invoke.invoke")
    await override(client, token, team, "agent.invoke", rate_per_minute=600)
    return await granted(client, token, team, "agent.invoke")


async def test_an_invocation_returns_the_output_with_the_chain(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    status, body = await invoke(client, tok, "agent.invoke",
                                {"agent_id": agents.id("echo"), "input": {"text": "hi", "report_tokens": 42}})
    assert status == 200 and body["status"] == "COMPLETED", body
    out = body["output"]
    assert out["agent_id"] == agents.id("echo") and out["depth"] == 1
    assert out["output"]["input"] == {"text": "hi", "report_tokens": 42}
    assert out["output"]["chain"] == ["agent-1"] and out["output"]["caller"] == "agent-1"
    assert body["tokens_used"] == 42  # the callee's reported usage, charged to the caller
    assert body["object_refs"][0]["type"] == "agent_invocation"
    assert agents.seen[-1].team_id == team


async def test_the_callee_acts_with_its_own_rights_never_the_callers(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    task_tok = await granted(client, token, team, "task.create")  # agent-1 only
    assert (await invoke(client, task_tok, "task.create", {"title": "mine"}))[0] == 200
    status, body = await invoke(client, tok, "agent.invoke", {
        "agent_id": agents.id("actor"), "input": {"tool": "task.create", "args": {"title": "theirs"}}})
    assert status == 200, body
    assert body["output"]["output"]["status"] == 403
    assert body["output"]["output"]["code"] == "denied"
    admin = token(agent="root", team="ops", role="admin")
    r = await client.get(f"/v1/admin/decisions?team_id={team}&agent_id={agents.id('actor')}&tool=task.create",
                         headers=bearer(admin))
    deadline = time.monotonic() + 5
    while not (rows := (await r.json())["decisions"]):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
        r = await client.get(f"/v1/admin/decisions?team_id={team}&agent_id={agents.id('actor')}"
                             "&tool=task.create", headers=bearer(admin))
    assert [d["result"] for d in rows] == ["deny"]  # decided for the callee, as itself


async def test_usage_and_budget_are_charged_to_the_callers_run(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    r = await client.post("/v1/runs", headers=bearer(tok), json={"budget": {"max_calls": 3}})
    run_id = (await r.json())["run_id"]
    math = {"agent_id": agents.id("actor"), "input": {"tool": "math", "args": {"expr": "1+1"}}}
    status, body = await invoke(client, tok, "agent.invoke", math, context={"agent_run_id": run_id})
    assert status == 200 and body["output"]["output"]["status"] == 200, body
    deadline = time.monotonic() + 5  # the calls' rows are journaled just after the responses
    while len((run := await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json())["calls"]) < 2:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert sorted(c["tool"] for c in run["calls"]) == ["agent.invoke", "math"]
    assert run["used"]["calls"] == 2  # the callee's call counts against the caller's run
    # Call 3 (agent.invoke) fits the budget; the callee's math would be call 4.
    status, body = await invoke(client, tok, "agent.invoke", math, context={"agent_run_id": run_id})
    assert status == 200 and body["output"]["output"]["status"] == 403, body
    assert body["output"]["output"]["code"] == "run_budget_exceeded"
    status, body = await invoke(client, tok, "agent.invoke", math, context={"agent_run_id": run_id})
    assert status == 403 and body["error"]["code"] == "run_budget_exceeded"

    r = await client.post("/v1/runs", headers=bearer(tok), json={"budget": {"max_tokens": 100}})
    run_id = (await r.json())["run_id"]
    echo = {"agent_id": agents.id("echo"), "input": {"report_tokens": 60}}
    assert (await invoke(client, tok, "agent.invoke", echo, context={"agent_run_id": run_id}))[0] == 200
    assert agents.seen[-1].run_id == run_id  # the callee was told which run to charge
    deadline = time.monotonic() + 5
    while (await (await client.get(f"/v1/runs/{run_id}", headers=bearer(tok))).json())["used"]["tokens"] != 60:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_the_depth_limit_refuses_a_fourth_level(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    r2, r3, echo = agents.id("r2"), agents.id("r3"), agents.id("echo")
    status, body = await invoke(client, tok, "agent.invoke",
                                {"agent_id": agents.id("r1"), "input": {"next": [r2, r3]}})
    assert status == 200, body
    level1 = body["output"]["output"]
    level2 = level1["inner"]
    level3 = level2["inner"]
    assert (level1["depth"], level2["depth"], level3["depth"]) == (1, 2, 3)
    assert level3["chain"] == ["agent-1", agents.id("r1"), r2]
    status, body = await invoke(client, tok, "agent.invoke",
                                {"agent_id": agents.id("r1"), "input": {"next": [r2, r3, echo]}})
    assert status == 200, body
    deepest = body["output"]["output"]["inner"]["inner"]
    assert deepest["tool_code"] == "agent_depth_exceeded" and deepest["inner"] is None


async def test_a_cycle_is_refused(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    r1 = agents.id("r1")
    status, body = await invoke(client, tok, "agent.invoke",
                                {"agent_id": r1, "input": {"next": [agents.id("r2"), r1]}})
    assert status == 200, body
    assert body["output"]["output"]["inner"]["tool_code"] == "agent_cycle"
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": r1, "input": {"next": [r1]}})
    assert body["output"]["output"]["tool_code"] == "agent_cycle"
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": r1, "input": {"next": ["agent-1"]}})
    assert body["output"]["output"]["tool_code"] == "agent_cycle"  # back to the caller


async def test_an_invocation_id_is_bound_to_its_callee(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": agents.id("echo"), "input": {}})
    used = body["output"]["invocation_id"]
    for invocation_id in (used, uuid.uuid4().hex):  # ended, and never existed
        status, body = await invoke(client, tok, "agent.invoke", {
            "agent_id": agents.id("echo"), "input": {}, "invocation_id": invocation_id})
        assert tool_code(body) == "invalid_invocation", body


async def test_refusals_before_anything_is_sent(client, token, team, agents, nats_url) -> None:
    tok = await invoker(client, token, team)
    nc = await nats_client.connect(nats_url)
    sent: list[str] = []

    async def spy(msg: Any) -> None:
        sent.append(msg.subject)

    await nc.subscribe("agents.>", cb=spy)
    try:
        other = f"t_{uuid.uuid4().hex[:10]}"
        admin = token(agent="root", team="ops", role="admin")
        r = await client.post("/v1/admin/agents", headers=bearer(admin), json={
            "agent_id": f"echo-{other}", "team_id": other, "description": "theirs",
            "input_schema": SCHEMAS["echo"]})
        assert r.status == 201
        cases = [
            ({"agent_id": f"echo-{other}", "input": {}}, "not_found"),  # another team's agent
            ({"agent_id": "nobody-registered", "input": {}}, "not_found"),
            ({"agent_id": agents.id("echo"), "input": {"text": 5}}, "invalid_input"),
            ({"agent_id": agents.id("echo"), "input": {"other": "x"}}, "invalid_input"),
        ]
        for args, code in cases:
            status, body = await invoke(client, tok, "agent.invoke", args)
            assert tool_code(body) == code, (args, body)
            assert status == (404 if code == "not_found" else 400)  # proxy/web/native.py TOOL_ERROR_HTTP
        for args in ({"agent_id": "a.b", "input": {}}, {"agent_id": "x", "input": {"t": "\u0000"}},
                     {"agent_id": "x", "input": {"n": 2**70}}, {"agent_id": "x"}):
            status, body = await invoke(client, tok, "agent.invoke", args)
            assert status == 400 and body["error"]["code"] in ("invalid_args", "invalid_request"), body
        await nc.flush()
        await asyncio.sleep(0.05)
        assert sent == []
    finally:
        await nc.close()


async def test_an_absent_slow_or_broken_agent_fails_with_its_code(client, token, team, agents) -> None:
    tok = await invoker(client, token, team)
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": agents.id("offline"), "input": {}})
    assert tool_code(body) == "agent_unavailable", body
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": agents.id("broken"), "input": {}})
    assert tool_code(body) == "agent_bad_reply", body  # a NUL in its output never reaches Postgres
    await tighten_timeout(client, token, team, "agent.invoke", 1_000)
    started = time.perf_counter()
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": agents.id("slow"), "input": {}})
    assert tool_code(body) == "agent_timeout", body
    assert time.perf_counter() - started < 2.5


async def test_registration_is_for_admins_and_bounded(client, token, team) -> None:
    admin = token(agent="root", team="ops", role="admin")
    gov = token(agent="gov", team=team, role="governance")
    agent_id = f"reg-{team}"
    good = {"agent_id": agent_id, "team_id": team, "description": "d", "input_schema": SCHEMAS["echo"]}
    for tok in (token(team=team), gov):
        r = await client.post("/v1/admin/agents", headers=bearer(tok), json=good)
        assert r.status == 403
    unbounded = [
        {"type": "object", "additionalProperties": False, "properties": {"s": {"type": "string"}}},
        {"type": "object", "properties": {"s": SHORT}},  # extra properties unbounded
        {"type": "object", "additionalProperties": False,
         "properties": {"a": {"type": "array", "items": SHORT}}},
        {"type": "object", "additionalProperties": False, "properties": {"x": {}}},
        {"type": "array"},
        {"type": "object", "additionalProperties": False, "properties": {"s": {"type": "nope"}}},
        {"type": "object", "additionalProperties": False, "description": "nul \u0000"},
        {"type": "object", "additionalProperties": False, "maxProperties": 2**70},
    ]
    for schema in unbounded:
        r = await client.post("/v1/admin/agents", headers=bearer(admin), json={**good, "input_schema": schema})
        assert r.status == 400 and (await r.json())["error"]["code"] in ("invalid_schema", "invalid_request"), schema
    for bad in ({**good, "agent_id": "a.b"}, {**good, "agent_id": "x" * 65}, {**good, "description": ""},
                {**good, "extra": 1}, {**good, "team_id": "bad team"}):
        r = await client.post("/v1/admin/agents", headers=bearer(admin), json=bad)
        assert r.status == 400, bad
    r = await client.post("/v1/admin/agents", headers=bearer(admin), json=good)
    assert r.status == 201 and (await r.json())["created"] is True
    r = await client.post("/v1/admin/agents", headers=bearer(admin), json={**good, "description": "new"})
    assert r.status == 200 and (await r.json())["agent"]["description"] == "new"
    other = f"t_{uuid.uuid4().hex[:10]}"
    r = await client.post("/v1/admin/agents", headers=bearer(admin), json={**good, "team_id": other})
    assert r.status == 409 and (await r.json())["error"]["code"] == "agent_id_taken"
    # Governance lists its own team's agents only; agents list nothing.
    r = await client.get("/v1/admin/agents", headers=bearer(gov))
    assert [a["agent_id"] for a in (await r.json())["agents"]] == [agent_id]
    r = await client.get(f"/v1/admin/agents?team_id={other}", headers=bearer(gov))
    assert r.status == 403
    assert (await client.get("/v1/admin/agents", headers=bearer(token(team=team)))).status == 403
    r = await client.post("/v1/admin/agents/remove", headers=bearer(admin),
                          json={"agent_id": agent_id, "team_id": other})
    assert r.status == 404
    r = await client.post("/v1/admin/agents/remove", headers=bearer(admin),
                          json={"agent_id": agent_id, "team_id": team})
    assert r.status == 200 and (await r.json())["removed"] is True


async def test_the_agents_command(client, team, tmp_path) -> None:
    url = str(client.make_url("")).rstrip("/")
    agent_id = f"cli-{team}"
    code, out, err = await cli("agents", "add", "--id", agent_id, "--team", team,
                               "--description", "from the command line", "--url", url)
    assert code == 0 and f"registered agent {agent_id} for team {team}" in out, err
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "properties": {"s": {"type": "string"}}}')
    code, _, err = await cli("agents", "add", "--id", agent_id, "--team", team, "--description", "x",
                             "--schema", f"@{schema}", "--url", url)
    assert code == 1 and "invalid_schema" in err
    code, out, err = await cli("agents", "list", "--team", team, "--url", url)
    assert code == 0 and agent_id in out and "from the command line" in out, err
    code, out, err = await cli("agents", "remove", "--id", agent_id, "--team", team, "--url", url)
    assert code == 0 and f"removed agent {agent_id}" in out, err
    code, out, _ = await cli("agents", "list", "--team", team, "--url", url)
    assert out.strip() == "no agents registered"


async def test_an_agent_inside_an_invocation_cannot_start_a_fresh_chain(client, token, team, agents) -> None:
    """Dropping its invocation_id would reset depth and cycle checks: refused while it serves."""
    tok = await invoker(client, token, team)
    status, body = await invoke(client, tok, "agent.invoke", {"agent_id": agents.id("actor"), "input": {
        "tool": "agent.invoke", "args": {"agent_id": agents.id("echo"), "input": {}}}})
    assert status == 200, body
    assert body["output"]["output"]["tool_code"] == "invocation_required", body
    # Outside any invocation the same agent may start one.
    actor = token(agent=agents.id("actor"), team=team)
    status, body = await invoke(client, actor, "agent.invoke", {"agent_id": agents.id("echo"), "input": {}})
    assert status == 200 and body["output"]["depth"] == 1, body
