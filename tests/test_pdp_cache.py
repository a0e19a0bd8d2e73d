"""The decision cache keys on what the policy reads: new arguments of a tool whose rules do not
read them, a new run id, or another agent with the same grants and overrides hit the cache;
arguments of an argument-aware tool never do."""

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


class _OneAgentDenied(_Grants):
    def overrides(self, team_id: str, agent_id: str, tool: str) -> list[dict]:
        if agent_id == "blocked":
            return [{"tool": tool, "effect": "deny", "timeout_ms": None, "rate_per_minute": None}]
        return []


async def test_agents_with_the_same_inputs_share_a_decision_and_no_other() -> None:
    """The policy does not read the agent's own id: agents of one team with the same grants and
    overrides share a decision; an agent with its own override, or another team, does not."""
    seen: list[str] = []
    pdp = PolicyDecisionPoint(EmbeddedEngine(), _OneAgentDenied(), on_cache=seen.append)  # type: ignore[arg-type]
    await pdp.load(load_policy_dir())

    async def decide(agent: str, team: str = "t"):
        d, _, _ = await pdp.decide(decision_id="d", agent_id=agent, team_id=team, roles=["agent"],
                                   tool=MATH, args={"expr": "1"}, context={"team_id": team},
                                   phase="call")
        return d

    assert all([(await decide(f"agent-{i}")).allow for i in range(4)])
    assert seen == ["miss", "hit", "hit", "hit"]
    seen.clear()
    blocked = await decide("blocked")
    assert not blocked.allow and seen == ["miss"]
    assert (await decide("agent-0", team="u")).allow and seen == ["miss", "miss"]



async def test_a_module_naming_the_agent_id_keys_decisions_on_the_agent() -> None:
    """A governance module that reads the agent's id without changing the shipped declaration:
    decisions are no longer shared between agents (one agent denied by name stays denied)."""
    from pdp.policy_set import PolicySet
    from pdp.reads import declared_reads

    shipped = load_policy_dir()
    assert not declared_reads(shipped).agent_id
    by_name = PolicySet(modules={**shipped.modules, "zz_block.rego": (
        "package toolproxy.authz\n\n"
        "deny contains \"agent_blocked\" if input.subject.agent_id == \"blocked\"\n")},
        tests={})
    assert declared_reads(by_name).agent_id
    seen: list[str] = []
    pdp = PolicyDecisionPoint(EmbeddedEngine(), _Grants(), on_cache=seen.append)  # type: ignore[arg-type]
    await pdp.load(by_name)

    async def decide(agent: str):
        d, _, _ = await pdp.decide(decision_id="d", agent_id=agent, team_id="t", roles=["agent"],
                                   tool=MATH, args={"expr": "1"}, context={"team_id": "t"},
                                   phase="call")
        return d

    assert (await decide("agent-0")).allow
    blocked = await decide("blocked")
    assert not blocked.allow and "agent_blocked" in blocked.reasons
    assert seen == ["miss", "miss"]


class _Answers:
    """An engine answering from a list, counting evaluations (the policy itself is not what
    these tests are about)."""

    name = "answers"
    revision = "r1"

    def __init__(self, *answers: object) -> None:
        self.answers, self.calls = list(answers), 0

    async def evaluate(self, doc: dict) -> object:
        self.calls += 1
        return self.answers[min(self.calls, len(self.answers)) - 1]


async def test_a_hit_is_the_parsed_decision_under_its_own_id() -> None:
    engine = _Answers({"allow": True, "reasons": ["ok"], "obligations": {"timeout_ms": 900}})
    pdp = PolicyDecisionPoint(engine, _Grants())  # type: ignore[arg-type]
    first, _, _ = await pdp.decide(decision_id="d1", agent_id="a", team_id="t", roles=["agent"],
                                   tool=MATH, args={}, context={"team_id": "t"}, phase="call")
    second, _, _ = await pdp.decide(decision_id="d2", agent_id="a", team_id="t", roles=["agent"],
                                    tool=MATH, args={}, context={"team_id": "t"}, phase="call")
    assert engine.calls == 1
    assert (first.decision_id, second.decision_id) == ("d1", "d2")
    assert second.allow and second.reasons == ["ok"] and second.obligations.timeout_ms == 900
    assert second.model_dump(exclude={"decision_id"}) == first.model_dump(exclude={"decision_id"})


async def test_a_malformed_answer_is_refused_every_time_and_never_cached() -> None:
    engine = _Answers({"allow": "yes"}, {"allow": True})
    pdp = PolicyDecisionPoint(engine, _Grants())  # type: ignore[arg-type]
    refused = await _decide(pdp, MATH, {})
    assert not refused.allow and refused.error_code is not None
    assert (await _decide(pdp, MATH, {})).allow and engine.calls == 2  # asked again, not cached
