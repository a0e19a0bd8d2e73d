"""router.route through the whole pipeline (the shipped rules), and governance changing the
rules: a pushed policy revision reaches the router's rules within its poll interval."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import pytest

from pdp.policy_set import default_policy_dir
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from infra.db import create_pool
from services.agents.store import AgentRepository
from services.router.choose import Router
from services.router.rules import RouterRules
from services.sdk import ToolError
from tests.support.c_helpers import granted, tool_code
from tests.support.calls import bearer, invoke


async def test_the_rules_pick_a_model_and_say_why(client, token, team) -> None:
    tok = await granted(client, token, team, "router.route")
    status, body = await invoke(client, tok, "router.route", {"prompt": "write a parser", "task": "code"})
    assert status == 200, body
    out = body["output"]
    assert out["target"] == {"kind": "model", "id": "medium"}
    assert "task:code" in out["reasons"] and "excluded:small:quality" in out["reasons"]
    assert "excluded:large:risk" in out["reasons"] and out["reasons"][-1] == "chose:medium"
    assert out["policy_revision"] == "shipped"
    status, body = await invoke(client, tok, "router.route", {})
    assert body["output"]["target"] == {"kind": "model", "id": "small"}  # the cheapest that fits


async def test_a_cost_ceiling_or_a_risk_can_leave_nothing(client, token, team) -> None:
    tok = await granted(client, token, team, "router.route")
    status, body = await invoke(client, tok, "router.route", {"task": "code", "cost_ceiling_1t": 0.0001})
    assert status == 200 and tool_code(body) == "no_route", body
    assert "excluded:medium:cost" in body["error"]["message"]
    status, body = await invoke(client, tok, "router.route", {"task": "code"},
                                context={"confidential": True})
    assert tool_code(body) == "no_route" and "confidential" in body["error"]["message"]
    status, body = await invoke(client, tok, "router.route", {"task": "pii"})
    assert body["output"]["target"]["id"] == "small"


@pytest.mark.parametrize("args", [
    {"task": "Not A Label"}, {"task": "x" * 65}, {"prompt": "a\u0000"}, {"cost_ceiling_1t": -1},
    {"cost_ceiling_1t": 10**9}, {"model": "small"},
])
async def test_bad_input_is_refused(client, token, team, args) -> None:
    tok = await granted(client, token, team, "router.route")
    status, body = await invoke(client, tok, "router.route", args)
    assert status == 400 and body["error"]["code"] in ("invalid_args", "invalid_request"), body


async def test_without_the_capability_it_is_denied(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "router.route", {})
    assert status == 403 and body["error"]["reasons"] == ["grant_required"]


TEAM_RULE = '''
teams := {
	"*": {"max_risk": "medium", "cost_ceiling_1t": null, "prefer": "cheapest", "agents": {}},
	"t_research": {"max_risk": "high", "cost_ceiling_1t": null, "prefer": "quality", "agents": {"triage": "triager"}},
}
'''


def _pushed_router() -> str:
    shipped = (Path(default_policy_dir()) / "router.rego").read_text()
    start = shipped.index("teams := {")
    end = shipped.index("\n", shipped.index("}}", start)) + 1
    return shipped[:start] + TEAM_RULE.strip() + "\n" + shipped[end:]


async def test_a_pushed_revision_changes_routing_at_once(aiohttp_client, isolated_settings, builtin,
                                                         token) -> None:
    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["text"])
    pool: asyncpg.Pool = await create_pool(isolated_settings.require_database_url(), min_size=1, max_size=2)
    rules = RouterRules(pool, poll_s=0.5)
    try:
        await rules.start()
        assert rules.revision == "shipped"
        await AgentRepository(pool).put(agent_id="triager", team_id="t_research", description="triage",
                                        input_schema={"type": "object", "additionalProperties": False},
                                        created_by="test")
        router = Router(rules, AgentRepository(pool), ("small", "medium", "large"))
        before = await router.route(team_id="t_research", agent_id="a", task="triage", prompt_tokens=10)
        assert (before.kind, before.id) == ("model", "small")

        policies = Path(default_policy_dir())
        modules = {"authz.rego": (policies / "authz.rego").read_text(), "router.rego": _pushed_router()}
        gov = token(agent="root", team="ops", role="admin")  # global policy: admins
        pushed_at = time.monotonic()
        r = await client.post("/v1/admin/policies", headers=bearer(gov), json={"modules": modules})
        assert r.status == 201, await r.text()
        revision = (await r.json())["revision"]
        while rules.revision != revision:
            assert time.monotonic() - pushed_at < 5, "the pushed rules never arrived"
            await asyncio.sleep(0.02)
        after = await router.route(team_id="t_research", agent_id="a", task="triage", prompt_tokens=10)
        assert (after.kind, after.id) == ("agent", "triager") and after.policy_revision == revision
        best = await router.route(team_id="t_research", agent_id="a", task=None, prompt_tokens=10)
        assert best.id == "large" and "prefer:quality" in best.reasons
        other = await router.route(team_id="t_other", agent_id="a", task="triage", prompt_tokens=10)
        assert other.id == "small"
        # Registered agents only: the rule names one that is not registered for that team.
        models_only = await router.route(team_id="t_research", agent_id="a", task="triage",
                                         prompt_tokens=10, kinds=("model",))
        assert models_only.kind == "model"

        # A revision without routing rules: the shipped ones serve again.
        r = await client.post("/v1/admin/policies", headers=bearer(gov),
                              json={"modules": {"authz.rego": modules["authz.rego"]}})
        assert r.status == 201
        deadline = time.monotonic() + 5
        while rules.revision != "shipped":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        with pytest.raises(ToolError) as refused:
            await router.route(team_id="t_research", agent_id="a", task="reason", prompt_tokens=10)
        assert refused.value.code == "no_route"
    finally:
        await rules.close()
        await pool.close()
