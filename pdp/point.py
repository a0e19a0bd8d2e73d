"""The decision point: input in, typed decision out; every failure is a denial (fail closed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import structlog

from pdp.cache import DecisionCache
from pdp.decision import Decision, parse_decision
from pdp.engine import Engine
from pdp.errors import PdpError, PdpTimeout
from pdp.data.grants import GrantCache
from pdp.input import Phase, build_input
from pdp.policy_set import PolicySet
from pdp.reads import EVERYTHING, InputReads, declared_reads

log = structlog.get_logger("toolproxy.pdp")


class PolicyDecisionPoint:
    def __init__(
        self,
        engine: Engine,
        grants: GrantCache,
        *,
        budget_s: float = 0.05,
        cache: DecisionCache | None = None,
        on_cache: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.grants = grants
        self.budget_s = budget_s
        self.cache = cache if cache is not None else DecisionCache()  # (an empty cache is falsy)
        self._on_cache = on_cache  # "hit" | "miss", for the metrics
        self.reads: InputReads = EVERYTHING  # what the serving revision's decisions read

    @property
    def revision(self) -> str:
        return self.engine.revision

    @property
    def ready(self) -> bool:
        """A policy is loaded, grants are loaded, and the engine can decide right now (an OPA
        server that lost its policy cannot, until it is pushed again)."""
        return bool(self.engine.revision) and self.grants.ready and getattr(self.engine, "healthy", True)

    async def load(self, policies: PolicySet) -> str:
        revision = await self.engine.load(policies)
        self.reads = declared_reads(policies)
        self.cache.clear()
        return revision

    async def decide(
        self,
        *,
        decision_id: str,
        agent_id: str,
        team_id: str,
        roles: Iterable[str],
        tool: Mapping[str, Any],
        args: Mapping[str, Any] | None,
        context: Mapping[str, Any],
        phase: Phase,
        approval: Mapping[str, Any] | None = None,
        scopes: Iterable[str] = (),
    ) -> tuple[Decision, float, dict[str, Any] | None]:
        """Returns (decision, seconds spent, the input document evaluated)."""
        started = time.perf_counter()
        revision = self.engine.revision
        doc: dict[str, Any] | None = None
        try:
            if not self.grants.ready:
                raise PdpError("grants are not loaded yet")
            doc = build_input(
                agent_id=agent_id,
                team_id=team_id,
                roles=roles,
                tool=tool,
                args=args,
                context=context,
                grants=self.grants.capabilities(team_id, agent_id),
                overrides=self.grants.overrides(team_id, agent_id, tool["tool_id"]),
                team_rules=self.grants.team_rules(team_id, tool["tool_id"]),
                approval=approval,
                phase=phase,
                scopes=scopes,
            )
            decision = await self._evaluate(revision, doc, decision_id)
        except PdpError as exc:
            decision = self._closed(exc.code, str(exc), decision_id, revision)
        except asyncio.TimeoutError:
            decision = self._closed("pdp_unavailable", "pdp_timeout", decision_id, revision)
        except Exception as exc:  # anything unexpected is still a denial
            log.exception("pdp_unexpected_error")
            decision = self._closed("pdp_unavailable", type(exc).__name__, decision_id, revision)
        return decision, time.perf_counter() - started, doc

    async def _evaluate(self, revision: str, doc: dict[str, Any], decision_id: str) -> Decision:
        """The engine's decision, parsed strictly; cached as parsed (a hit costs a copy with
        this decision's id, not a parse). A malformed or undefined answer is never cached."""
        key = DecisionCache.key(revision, doc, self.reads) if self.cache.enabled else None
        if key is not None:
            cached = self.cache.get(key)
            if self._on_cache is not None:
                self._on_cache("miss" if cached is None else "hit")
            if cached is not None:
                return cast(Decision, cached).model_copy(update={"decision_id": decision_id})
        decision = parse_decision(await self._run_engine(doc), decision_id=decision_id,
                                  engine=self.engine.name, revision=revision)
        if key is not None:
            self.cache.put(key, decision)
        return decision

    async def _run_engine(self, doc: dict[str, Any]) -> Any:
        """Within the budget, or a timeout. An in-process engine cannot be interrupted: it
        checks the budget itself, afterwards; a decision over budget is a denial."""
        evaluate_inline = getattr(self.engine, "evaluate_inline", None)
        if evaluate_inline is None:
            return await asyncio.wait_for(self.engine.evaluate(doc), self.budget_s)
        try:
            return evaluate_inline(doc, self.budget_s)
        except PdpTimeout:
            # Once more: a policy that is too slow is too slow twice; a one-off stall of the
            # host (seen on shared VMs, where even CPU time stretches) is not held against it.
            try:
                return evaluate_inline(doc, self.budget_s)
            except PdpTimeout:
                raise asyncio.TimeoutError from None

    def _closed(self, code: str, why: str, decision_id: str, revision: str) -> Decision:
        log.warning("pdp_failed_closed", code=code, error=why)
        reason = "pdp_timeout" if why == "pdp_timeout" else code
        return Decision.failed_closed(
            code, reason, decision_id=decision_id, engine=self.engine.name, revision=revision
        )
