"""Governance of one team never changes another team's decisions (issue 10 §1): the global
policy is an admin's; a team's governance tightens its own team with team rules, which reach
every replica within a second and mean the same on both engines."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer, grant, invoke

DENY_MEMORY = """package toolproxy.authz
import rego.v1
decision := {"allow": false, "require_approval": false, "reasons": ["pushed_by_b"],
             "obligations": {"timeout_ms": 1000, "rate": {"per_minute": 1}, "redact": []}}
"""


async def rule(client: Any, tok: str, team: str, tool: str, **fields: Any) -> tuple[int, dict[str, Any]]:
    r = await client.post("/v1/admin/team-rules", headers=bearer(tok),
                          json={"team_id": team, "tool": tool, **fields})
    return r.status, await r.json()


async def eventually(check: Any, within_s: float, what: str) -> float:
    """Polls `check()` until true; returns how long it took."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not await check():
        assert loop.time() - start < within_s, f"{what} not seen within {within_s} s"
        await asyncio.sleep(0.01)
    return loop.time() - start


async def decisions_of_a(client: Any, agent_a: str) -> list[tuple[int, Any]]:
    """Team A's answers to a fixed set of calls: the thing team B must not be able to move."""
    out = []
    for tool, args in (("math", {"expr": "1+1"}), ("memory", {"text": "One. Two.", "max_sentences": 1}),
                       ("task.list", {}), ("text", {"op": "upper", "text": "a"})):
        status, body = await invoke(client, agent_a, tool, args)
        out.append((status, body.get("error", {}).get("reasons") if status != 200 else body["output"]))
    r = await client.get("/v1/tools", headers=bearer(agent_a))
    out.append((r.status, sorted(t["tool_id"] for t in (await r.json())["tools"])))
    return out


async def test_team_b_governance_cannot_change_any_decision_of_team_a(client, token) -> None:
    team_a, team_b = f"ta_{uuid.uuid4().hex[:8]}", f"tb_{uuid.uuid4().hex[:8]}"
    agent_a = token(agent="ag-a", team=team_a)
    gov_a = token(agent="gov-a", team=team_a, role="governance")
    gov_b = token(agent="gov-b", team=team_b, role="governance")
    await grant(client, token, team_a, "tool.task.list.invoke")
    # Team A's own governance holds `text` for approval: a held call of A's for B to try.
    assert (await rule(client, gov_a, team_a, "text", require_approval=True))[0] == 201
    assert (await rule(client, gov_a, team_a, "memory", rate_per_minute=1000))[0] == 201
    await eventually(lambda: _held(client, agent_a), 2, "team A's rule")
    status, held = await invoke(client, agent_a, "text", {"op": "upper", "text": "held"})
    assert status == 202, held
    before = await decisions_of_a(client, agent_a)

    h = bearer(gov_b)
    attempts = [
        ("POST", "/v1/admin/policies", {"modules": {"authz.rego": DENY_MEMORY}}, 403),
        ("POST", "/v1/admin/grants", {"team_id": team_a, "agent_id": "ag-a",
                                      "capability": "tool.task.create.invoke"}, 403),
        ("POST", "/v1/admin/grants/revoke", {"team_id": team_a, "capability": "tool.task.list.invoke"}, 403),
        ("POST", "/v1/admin/overrides", {"team_id": team_a, "agent_id": "ag-a", "tool": "math",
                                         "effect": "deny"}, 403),
        ("POST", "/v1/admin/overrides/delete", {"team_id": team_a, "agent_id": "ag-a", "tool": "math"}, 403),
        ("POST", "/v1/admin/quotas", {"team_id": team_a, "invocations": 0}, 403),
        ("POST", "/v1/admin/quotas/delete", {"team_id": team_a}, 403),
        ("POST", "/v1/admin/team-rules", {"team_id": team_a, "tool": "math", "deny": True}, 403),
        ("POST", "/v1/admin/team-rules/delete", {"team_id": team_a, "tool": "text"}, 403),
        ("POST", f"/v1/approvals/{held['approval_id']}/decision", {"decision": "approve"}, 404),
        ("POST", f"/v1/calls/{held['call_id']}/cancel", None, 404),
        ("POST", "/v1/admin/standing-approvals", {
            "team_id": team_a, "tool": "text", "expires_at": "2099-01-01T00:00:00Z",
            "max_calls": 10}, 403),
        ("POST", "/v1/admin/egress", {"team_id": team_a, "hosts": ["example.com"]}, 403),
        # Platform-wide switches: the catalog and the registrations are every team's.
        ("POST", "/v1/admin/plugins/enable", {"name": "text.wordfreq", "version": "1.0.0"}, 403),
        ("POST", "/v1/admin/plugins/disable", {"name": "text.wordfreq"}, 403),
        ("POST", "/v1/admin/external-apis/delete", {"name": "anything"}, 403),
        ("POST", "/v1/admin/agents/remove", {"agent_id": "anything"}, 403),
        ("GET", f"/v1/admin/team-rules?team_id={team_a}", None, 403),
        ("GET", f"/v1/approvals?team_id={team_a}", None, 403),
    ]
    for method, path, body, expected in attempts:
        r = await client.request(method, path, json=body, headers=h)
        assert r.status == expected, (method, path, r.status, await r.text())
    # B's own listings never show A's objects.
    r = await client.get("/v1/approvals", headers=h)
    assert (await r.json())["approvals"] == []
    r = await client.get("/v1/admin/team-rules", headers=h)
    assert (await r.json())["team_rules"] == []

    await asyncio.sleep(1.2)  # past the cache's NOTIFY reload: anything that leaked would show
    assert await decisions_of_a(client, agent_a) == before
    r = await client.get(f"/v1/approvals?team_id={team_a}", headers=bearer(gov_a))
    states = {a["approval_id"]: a["state"] for a in (await r.json())["approvals"]}
    assert states[held["approval_id"]] == "pending" and set(states.values()) == {"pending"}
    r = await client.get("/v1/admin/policies", headers=bearer(gov_a))
    assert r.status == 200  # governance still reads the serving revision


async def _held(client: Any, agent: str) -> bool:
    status, body = await invoke(client, agent, "text", {"op": "lower", "text": "probe"})
    return status == 202


async def test_team_b_governance_tightens_team_b_only(client, token) -> None:
    team_a, team_b = f"ta_{uuid.uuid4().hex[:8]}", f"tb_{uuid.uuid4().hex[:8]}"
    agent_a, agent_b = token(agent="ag", team=team_a), token(agent="ag", team=team_b)
    gov_b = token(agent="gov-b", team=team_b, role="governance")
    status, body = await rule(client, gov_b, team_b, "math", deny=True, reason="no maths here")
    assert status == 201, body
    assert body["team_rule"]["deny"] is True and body["team_rule"]["team_id"] == team_b

    async def denied_for_b() -> bool:
        return (await invoke(client, agent_b, "math", {"expr": "1"}))[0] == 403

    await eventually(denied_for_b, 1.0, "B's rule")
    status, out = await invoke(client, agent_b, "math", {"expr": "1"})
    assert out["error"]["reasons"] == ["team_rule_deny"]
    r = await client.get("/v1/tools", headers=bearer(agent_b))
    assert "math" not in {t["tool_id"] for t in (await r.json())["tools"]}
    # Same agent id, other team: untouched.
    assert (await invoke(client, agent_a, "math", {"expr": "1"}))[0] == 200
    r = await client.get("/v1/tools", headers=bearer(agent_a))
    assert "math" in {t["tool_id"] for t in (await r.json())["tools"]}

    # A lower rate, and a shorter deadline, for B's agents.
    assert (await rule(client, gov_b, team_b, "text", rate_per_minute=1))[0] == 201
    assert (await rule(client, gov_b, team_b, "testsvc.patient", timeout_ms=200))[0] == 201
    await asyncio.sleep(0.5)
    codes = [(await invoke(client, agent_b, "text", {"op": "upper", "text": "x"}))[0] for _ in range(3)]
    assert codes[0] == 200 and 429 in codes[1:], codes
    status, out = await invoke(client, agent_b, "testsvc.patient", {"seconds": 1.0})
    assert status == 504 and out["error"]["code"] == "timeout", out
    assert [(await invoke(client, agent_a, "text", {"op": "upper", "text": "x"}))[0] for _ in range(3)] == [200] * 3

    # Removing the rule gives B its default back.
    r = await client.post("/v1/admin/team-rules/delete", headers=bearer(gov_b),
                          json={"team_id": team_b, "tool": "math"})
    assert r.status == 200
    await eventually(lambda: _ok(client, agent_b), 1.0, "the deletion")


async def _ok(client: Any, agent: str) -> bool:
    return (await invoke(client, agent, "math", {"expr": "1"}))[0] == 200


async def test_team_rules_route_is_governance_only_and_never_loosens(client, token, team) -> None:
    agent = token(agent="ag", team=team)
    gov = token(agent="gov", team=team, role="governance")
    status, body = await rule(client, agent, team, "math", deny=True)
    assert status == 403 and body["error"]["code"] == "forbidden"
    r = await client.get("/v1/admin/team-rules", headers=bearer(agent))
    assert r.status == 403
    # A rule must tighten something; there is no "allow".
    for fields in ({}, {"deny": False}, {"allow": True}, {"effect": "allow"}):
        status, body = await rule(client, gov, team, "task.create", **fields)
        assert status == 400, (fields, body)
    status, body = await rule(client, gov, team, "no.such.tool", deny=True)
    assert status == 404 and body["error"]["code"] == "unknown_tool"
    status, body = await rule(client, gov, team, "Math", deny=True)
    assert status == 400
    # A rate on a write tool without a grant still grants nothing.
    assert (await rule(client, gov, team, "task.create", rate_per_minute=5))[0] == 201
    await asyncio.sleep(0.3)
    status, out = await invoke(client, agent, "task.create", {"title": "x"})
    assert status == 403 and out["error"]["reasons"] == ["grant_required"]
    r = await client.post("/v1/admin/team-rules/delete", headers=bearer(gov),
                          json={"team_id": team, "tool": "math"})
    assert r.status == 404


async def test_a_team_rule_reaches_another_replica_within_a_second(aiohttp_client, settings, builtin,
                                                                   token, team) -> None:
    apps = [create_app(settings), create_app(settings)]
    a, b = [await aiohttp_client(app) for app in apps]
    for app in apps:
        await app[appkeys.CATALOG].wait_available(["math"])
    agent = token(agent="ag", team=team)
    assert (await invoke(b, agent, "math", {"expr": "1"}))[0] == 200
    gov = token(agent="gov", team=team, role="governance")
    assert (await rule(a, gov, team, "math", deny=True))[0] == 201
    took = await eventually(lambda: _denied(b, agent), 1.0, "the rule on replica b")
    assert took < 1.0


async def _denied(client: Any, agent: str) -> bool:
    return (await invoke(client, agent, "math", {"expr": "1"}))[0] == 403


async def test_team_rules_on_the_real_opa_server(aiohttp_client, settings, builtin, opa_url,
                                                 token) -> None:
    """The same rules through TOOLPROXY_PDP=opa: the input carries them; OPA decides."""
    app = create_app(settings.model_copy(update={"pdp": "opa", "opa_url": opa_url}))
    c = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["math", "text"])
    assert app[appkeys.PDP].engine.name == "opa"
    team_a, team_b = f"ta_{uuid.uuid4().hex[:8]}", f"tb_{uuid.uuid4().hex[:8]}"
    agent_a, agent_b = token(agent="ag", team=team_a), token(agent="ag", team=team_b)
    gov_b = token(agent="gov-b", team=team_b, role="governance")
    assert (await rule(c, gov_b, team_b, "math", deny=True))[0] == 201
    assert (await rule(c, gov_b, team_b, "text", require_approval=True))[0] == 201
    await eventually(lambda: _denied(c, agent_b), 1.0, "B's rule on OPA")
    status, out = await invoke(c, agent_b, "math", {"expr": "1"})
    assert out["error"]["reasons"] == ["team_rule_deny"]
    await eventually(lambda: _held(c, agent_b), 1.0, "B's approval rule on OPA")
    assert (await invoke(c, agent_a, "math", {"expr": "1"}))[0] == 200
    assert (await invoke(c, agent_a, "text", {"op": "upper", "text": "a"}))[0] == 200
