"""Choosing a target: the request and what is available (the model allowlist, the team's
registered agents) in, the rules' choice and reasons out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from services.router.errors import NoRoute, RouterUnavailable
from services.router.rules import RouterRules, RulesError

BYTES_PER_TOKEN = 4.0  # the same rough estimate the proxy reserves quota tokens with
DEFAULT_COMPLETION_TOKENS = 512


def prompt_tokens(text_bytes: int) -> int:
    return math.ceil(text_bytes / BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Route:
    kind: str
    id: str
    reasons: list[str]
    policy_revision: str

    def output(self) -> dict[str, Any]:
        return {"target": {"kind": self.kind, "id": self.id}, "reasons": self.reasons,
                "policy_revision": self.policy_revision}


def route_input(*, team_id: str, agent_id: str, task: str | None, prompt_tokens: int,
                completion_tokens: int, cost_ceiling_1t: float | None, confidential: bool,
                kinds: Sequence[str], models: Sequence[str], agents: Sequence[str]) -> dict[str, Any]:
    """The rules' input document (router.rego's header says what each key means)."""
    return {
        "team_id": team_id, "agent_id": agent_id, "task": task,
        "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "cost_ceiling_1t": cost_ceiling_1t, "confidential": confidential,
        "kinds": list(kinds), "models": list(models), "agents": list(agents),
    }


class AgentIds(Protocol):
    """Where the team's registered agents come from (the agents' store, services/agents):
    handed in by whoever builds the router, so the router knows no other family."""

    async def ids(self, team_id: str) -> list[str]: ...


class Router:
    def __init__(self, rules: RouterRules, agents: AgentIds, models: Sequence[str]) -> None:
        self.rules = rules
        self._agents = agents
        self.models = tuple(models)

    async def route(self, *, team_id: str, agent_id: str, task: str | None, prompt_tokens: int,
                    completion_tokens: int = DEFAULT_COMPLETION_TOKENS,
                    cost_ceiling_1t: float | None = None, confidential: bool = False,
                    kinds: Sequence[str] = ("model", "agent")) -> Route:
        """The chosen target; NoRoute when nothing fits, RouterUnavailable when the rules
        cannot decide."""
        agents = await self._agents.ids(team_id) if "agent" in kinds else []
        doc = route_input(team_id=team_id, agent_id=agent_id, task=task, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, cost_ceiling_1t=cost_ceiling_1t,
                          confidential=confidential, kinds=kinds, models=self.models, agents=agents)
        try:
            decision, revision = self.rules.decide(doc)
        except RulesError as exc:
            raise RouterUnavailable(str(exc)) from None
        if decision.target is None:
            why = ", ".join(decision.reasons)[:800]
            raise NoRoute(f"no model or agent fits this request under the routing rules ({why})")
        return Route(decision.target.kind, decision.target.id, decision.reasons, revision)
