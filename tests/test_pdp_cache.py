"""The decision cache keys on what the policy reads: new arguments of a tool whose rules do not
read them, or a new run id, hit the cache; arguments of an argument-aware tool never do."""

from __future__ import annotations

from pdp.embedded import EmbeddedEngine
from pdp.point import PolicyDecisionPoint
from pdp.policy_set import load_policy_dir


class _Grants:
    ready = True

    def capabilities(self, team_id: str, agent_id: str) -> list[str]:
        return ["tool.greenfood.order.invoke"]

    def overrides(self, team_id: str, agent_id: str, tool: str) -> list[dict]:
        return []

    def team_rules(self, team_id: str, tool: str) -> list[dict]:
        return []


MATH = {"tool_id": "math", "category": "A", "action": "read", "timeout_ms": 2000}
GREENFOOD = {"tool_id": "greenfood.order", "category": "D", "action": "write", "timeout_ms": 5000,
             "requires_approval": True}


async def _decide(pdp: PolicyDecisionPoint, tool: dict, args: dict, run: str | None = None):
    d, _, _ = await pdp.decide(decision_id="d", agent_id="a", team_id="t", roles=["agent"],
                               tool=tool, args=args, context={"team_id": "t", "agent_run_id": run},
                               phase="call")
    return d


async def test_keys_hold_only_what_the_policy_reads() -> None:
    seen: list[str] = []
    pdp = PolicyDecisionPoint(EmbeddedEngine(), _Grants(), on_cache=seen.append)  # type: ignore[arg-type]
    await pdp.load(load_policy_dir())
    for i in range(5):
        assert (await _decide(pdp, MATH, {"expr": f"{i}+1"}, run=f"run-{i}")).allow
    assert seen == ["miss", "hit", "hit", "hit", "hit"]
    seen.clear()
    allowed = await _decide(pdp, GREENFOOD, {"op": "create_order", "product_id": "milk", "qty": 1})
    refused = await _decide(pdp, GREENFOOD, {"op": "set_price", "product_id": "milk", "price": 1})
    assert allowed.allow and not refused.allow and refused.reasons == ["greenfood_op_forbidden"]
    assert seen == ["miss", "miss"]
