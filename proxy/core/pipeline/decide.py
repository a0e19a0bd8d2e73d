"""Deciding a call: a standing approval claimed where one applies, the policy's decision, and
what it means for the call — refused here, held for an approval, or on to execution."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from infra import tracing
from pdp.data.standing import StandingApprovals
from pdp.decision import Decision
from pdp.decision_log import DecisionRecord, decision_record
from pdp.point import PolicyDecisionPoint
from proxy.core.call import Call, Ending
from proxy.core.pipeline.prepared import Prepared
from proxy.metrics import Metrics


@dataclass(slots=True)
class Decided:
    """The policy's decision on a call. `refusal`: how the call ends here; else `hold` says
    whether it waits for an approval or is executed."""

    call: Call
    decision: Decision
    seconds: float
    doc: Any
    at: datetime
    refusal: Ending | None = None
    hold: bool = False

    def record(self) -> DecisionRecord:
        """Its decision-log record, built when needed (an executed call builds it while its
        tool runs)."""
        call = self.call
        return decision_record(
            self.decision, self.doc, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, roles=call.identity.roles,
            tool=call.manifest.tool_id, phase="call", latency_s=self.seconds,
            call_id=call.call_id, at=self.at,
        )


class Decide:
    def __init__(self, *, pdp: PolicyDecisionPoint, prepared: Prepared, metrics: Metrics,
                 standing: StandingApprovals | None) -> None:
        self._pdp = pdp
        self._prepared = prepared
        self._metrics = metrics
        self._standing = standing

    async def __call__(self, call: Call) -> Decided:
        if not call.resumed:
            call.requested_at = datetime.now(timezone.utc)  # its event: see Records.requested
        if self._standing is not None and call.approval is None and call.manifest.requires_approval:
            call.approval = await self._standing.claim(  # a standing approval, counted; else None
                team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                tool=call.manifest.tool_id, args=call.args)
        with tracing.span("decide"):
            decision, seconds, doc = await self._pdp.decide(
                decision_id=call.decision_id,
                agent_id=call.identity.agent_id,
                team_id=call.identity.team_id,
                roles=call.identity.roles,
                scopes=call.identity.scopes,
                tool=self._prepared.of(call.manifest).view,
                args=call.args,
                context=call.context,
                phase="call",
                approval=call.approval,
            )
        m = self._metrics
        m.child(m.pdp_duration, decision.engine, "call").observe(seconds)
        decided = Decided(call, decision, seconds, doc, datetime.now(timezone.utc))
        if decision.error_code is not None:
            m.pdp_errors.labels(code=decision.error_code).inc()
            m.child(m.pdp_decisions, "call", "error").inc()
            decided.refusal = Ending("UNAVAILABLE", decision.error_code,
                                     "the policy decision point could not decide; nothing was "
                                     "executed", reasons=decision.reasons)
            return decided
        m.child(m.pdp_decisions, "call", "allow" if decision.allow else "deny").inc()
        if not decision.allow:
            decided.refusal = Ending("DENIED", "denied", "policy denied this call",
                                     reasons=decision.reasons)
        elif decision.require_approval:
            decided.refusal = self._unheld(call, decision)
            decided.hold = decided.refusal is None
        return decided

    @staticmethod
    def _unheld(call: Call, decision: Decision) -> Ending | None:
        """Why a call the policy would hold cannot wait for an approval, if it cannot."""
        if call.parent_call_id is not None:
            # A plugin's internal call cannot wait for a governance decision: it runs under
            # its plugin call's approval (inherited) or not at all.
            return Ending("DENIED", "denied", "an internal call of a plugin needs the "
                          "approval of the plugin's own call", reasons=decision.reasons)
        if call.approval is not None:  # a resumed call must not need approval twice
            return Ending("DENIED", "denied", "the approval does not cover this call",
                          reasons=decision.reasons)
        return None
