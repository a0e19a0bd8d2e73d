"""Holding a call for a governance approval: prepared first where its tool builds what it would
run (proxy.core.binding), then an approval requested, its decision and events made durable."""

from __future__ import annotations

import structlog

from infra.nats_inbox import Inbox
from pdp.data.approvals import ApprovalRepository
from proxy.core.binding import prepare_held
from proxy.core.outcome import Outcome
from proxy.core.signing import ContextSigner
from proxy.core.pipeline.decide import Decided
from proxy.core.pipeline.records import Records
from proxy.metrics import Metrics
from proxy.records.journal import Journal
from wire.digest import args_digest

log = structlog.get_logger("toolproxy.pipeline")


class Hold:
    def __init__(self, *, inbox: Inbox, approvals: ApprovalRepository, journal: Journal,
                 records: Records, metrics: Metrics, signer: ContextSigner) -> None:
        self._inbox = inbox
        self._signer = signer
        self._approvals = approvals
        self._journal = journal
        self._records = records
        self._metrics = metrics

    async def __call__(self, d: Decided) -> Outcome:
        """AUTHORIZATION_REQUIRED with the approval to wait for; or, when the call cannot be
        prepared, its ending (nothing ran)."""
        call, decision, record = d.call, d.decision, d.record()
        self._records.requested(call)
        preview, refused = await prepare_held(self._inbox, call, self._metrics, self._signer)
        if refused is not None:
            return await self._records.end(call, decision, refused, record)
        digest, size = args_digest(call.args)
        approval = await self._approvals.request(
            call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, agent_run_id=call.agent_run_id,
            tool=call.manifest.tool_id, args=call.args, args_hash=digest, args_size=size,
            confidential=call.confidential, reasons=decision.reasons,
            policy_revision=decision.policy_revision, preview=preview, turn_id=call.turn_id,
        )
        self._records.emit(call, "agent.authorization.required",
                           refs={"approval_id": approval.approval_id},
                           payload={"tool": call.manifest.tool_id, "reasons": decision.reasons})
        await self._journal.record(  # durable even if cancelled
            decisions=[record], events=call.events, key=f"{call.call_id}:held")
        self._metrics.requests.labels(tool=call.manifest.tool_id, category=call.manifest.category,
                                      status="AUTHORIZATION_REQUIRED").inc()
        log.info("call_awaiting_approval", approval_id=approval.approval_id)
        return Outcome.held(call_id=call.call_id, decision_id=call.decision_id,
                            approval_id=approval.approval_id,
                            expires_at=approval.expires_at.isoformat(), reasons=decision.reasons)
