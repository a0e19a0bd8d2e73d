"""Fail closed: a real engine made to fail (raise, overrun its budget) denies; nothing runs."""

from __future__ import annotations

import pytest

from tests.support.calls import invoke
from tests.support.policy_app import RAISES, SLOW, app_with_policy


@pytest.mark.parametrize("source, reason", [(SLOW, "pdp_timeout"), (RAISES, "pdp_unavailable")],
                         ids=["overruns its budget", "built-in error"])
async def test_engine_failure_denies(aiohttp_client, settings, builtin, token, team, tmp_path,
                                     bus_spy, source, reason) -> None:
    client = await app_with_policy(aiohttp_client, settings, tmp_path, source, pdp_budget_ms=20)
    # "pi" is a fine expression for the tool, but not a number for to_number(): a built-in error.
    status, body = await invoke(client, token(team=team), "math", {"expr": "pi"})
    assert status == 503
    assert body["status"] == "UNAVAILABLE"
    assert body["error"]["code"] == "pdp_unavailable"
    assert body["error"]["reasons"] == [reason]
    await bus_spy.settle()
    assert bus_spy.subjects == []
    metrics = await (await client.get("/metrics")).text()
    assert 'toolproxy_pdp_errors_total{code="pdp_unavailable"} 1.0' in metrics
    # Listing fails closed as well: no partial catalog.
    r = await client.get("/v1/tools", headers={"Authorization": f"Bearer {token(team=team)}"})
    assert r.status == 503 and (await r.json())["error"]["code"] == "pdp_unavailable"


async def test_the_same_slow_policy_allows_within_a_generous_budget(
    aiohttp_client, settings, builtin, token, team, tmp_path
) -> None:
    # Proves the policy itself is fine: only the budget made the previous test deny.
    client = await app_with_policy(aiohttp_client, settings, tmp_path, SLOW, pdp_budget_ms=5000)
    status, body = await invoke(client, token(team=team), "math", {"expr": "1+1"})
    assert status == 200, body


async def test_a_one_off_stall_is_retried_but_a_slow_policy_is_not(settings, tmp_path) -> None:
    """The budget check re-runs an over-budget evaluation once: a one-off stall passes the
    second time, a slow policy fails twice (the engine counts its own CPU time)."""
    from pdp.embedded import EmbeddedEngine
    from pdp.errors import PdpTimeout
    from pdp.point import PolicyDecisionPoint
    from pdp.policy_set import load_policy_dir

    class Grants:
        ready = True

        def capabilities(self, team_id: str, agent_id: str) -> list[str]:
            return []

        def overrides(self, team_id: str, agent_id: str, tool: str) -> list[dict]:
            return []

        def team_rules(self, team_id: str, tool: str) -> list[dict]:
            return []

    class StallsOnce(EmbeddedEngine):
        calls = 0

        def evaluate_inline(self, doc, budget_s=None):  # type: ignore[no-untyped-def]
            StallsOnce.calls += 1
            if StallsOnce.calls == 1:
                raise PdpTimeout("a stall")
            return super().evaluate_inline(doc, budget_s)

    tool = {"tool_id": "math", "category": "A", "action": "read", "timeout_ms": 2000}
    pdp = PolicyDecisionPoint(StallsOnce(), Grants(), budget_s=0.05)  # type: ignore[arg-type]
    await pdp.load(load_policy_dir())
    d, _, _ = await pdp.decide(decision_id="d", agent_id="a", team_id="t", roles=["agent"], tool=tool,
                               args={"expr": "1"}, context={"team_id": "t"}, phase="call")
    assert d.allow and StallsOnce.calls == 2

    (tmp_path / "authz.rego").write_text(SLOW)
    slow = PolicyDecisionPoint(EmbeddedEngine(), Grants(), budget_s=0.005)  # type: ignore[arg-type]
    await slow.load(load_policy_dir(tmp_path))
    d, _, _ = await slow.decide(decision_id="d", agent_id="a", team_id="t", roles=["agent"], tool=tool,
                                args={"expr": "1"}, context={"team_id": "t"}, phase="call")
    assert not d.allow and d.reasons == ["pdp_timeout"]
