"""What a call leaves behind: its events along the way, its RUNNING note, and at its end its
usage, row, decision and events, made durable in one journal entry, and counted."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

import structlog

from infra import tracing
from infra.nats_inbox import Meanwhile
from pdp.data.standing import StandingApprovals
from pdp.decision import Decision
from pdp.decision_log import DecisionRecord
from proxy.config import Settings
from proxy.core.accounting import call_record, terminal_event, usage_record
from proxy.core.call import Call, Ending, outcome_of
from proxy.core.outcome import HttpStatusOf, Outcome, response_body
from proxy.metrics import Metrics
from proxy.records.calls import CallRecord
from proxy.records.events import event
from proxy.records.entry import Entry
from proxy.records.journal import Journal
from wire.digest import args_digest

log = structlog.get_logger("toolproxy.pipeline")


class Records:
    def __init__(self, *, settings: Settings, journal: Journal, metrics: Metrics, owner: str,
                 http_status: HttpStatusOf, standing: StandingApprovals | None) -> None:
        self._settings = settings
        self._journal = journal
        self._metrics = metrics
        self._owner = owner  # this replica (proxy.core.inflight): it vouches for its running calls
        self._http_status = http_status
        self._standing = standing
        self._notes: set[asyncio.Task[None]] = set()

    # --- the end of every call --------------------------------------------------------------

    async def end(self, call: Call, decision: Decision, e: Ending,
                  record: DecisionRecord | None) -> Outcome:
        """The ending as an Outcome; its usage, row, decision and events made durable; counted.
        Whatever admission held for it is settled or released already (the caller's part)."""
        self.requested(call)
        outcome = outcome_of(call, e)
        body = response_body(outcome)
        http_status = self._http_status(outcome)
        if self._standing is not None and not e.executed:
            self._standing.refund(call.approval)  # a standing approval's call that never ran
        elapsed = time.perf_counter() - call.t0
        finished = datetime.now(timezone.utc)
        call.events.append(terminal_event(call, e, http_status, elapsed))
        # An approved call refused for now on its resume (429, 503: nothing ran) is not over:
        # its approval still stands, so it gets no ending row and no usage row yet — only its
        # decision and events. Its one usage row comes when it really ends.
        over = not (call.resumed and e.transient)
        usage = usage_record(call, decision, e, http_status, elapsed, finished) if over else None
        row = call_record(call, e, body, http_status, owner=self._owner, elapsed_s=elapsed,
                          finished=finished) if over else None
        m, metrics = call.manifest, self._metrics

        def counted() -> None:
            # Not part of the records: done while the stream stores them (infra.nats_inbox.Meanwhile).
            metrics.child(metrics.requests, m.tool_id, m.category, e.status).inc()
            if e.code is not None:
                metrics.child(metrics.errors, e.code).inc()
            metrics.child(metrics.request_duration, m.tool_id, m.category,
                          e.status).observe(elapsed)
            log.info("call_finished", status=e.status, code=e.code, http_status=http_status,
                     latency_ms=round(elapsed * 1000.0, 3),
                     policy_revision=decision.policy_revision, reasons=decision.reasons)

        later = Meanwhile(counted)
        try:
            # A cancelled request (shutdown) still leaves its records behind: Journal.record
            # sees to that.
            with tracing.span("record"):
                await self._journal.record(
                    usage=usage, call=row, decisions=[record] if record is not None else [],
                    events=call.events, meanwhile=later)
        finally:
            later.finish()
        return outcome

    # --- records along the way ---------------------------------------------------------------

    def start_note(self, call: Call, started: datetime,
                   deadline: datetime) -> asyncio.TimerHandle | None:
        """A call's RUNNING row (so other replicas see it running, and resolve it if this one
        dies) — only for a call still running after `start_note_after_ms`: a short call's end
        record says everything, in one publish. A call with an idempotency key is noted at once
        (a replay after a crash must find it)."""
        after = self._settings.start_note_after_ms / 1000.0
        if call.idempotency_key is not None or after <= 0:
            self._spawn(self._note_start(call, started, deadline))
            return None
        return asyncio.get_running_loop().call_later(
            after, lambda: self._spawn(self._note_start(call, started, deadline)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def _note_start(self, call: Call, started: datetime, deadline: datetime) -> None:
        row = CallRecord(
            call_id=call.call_id, team_id=call.identity.team_id, agent_id=call.identity.agent_id,
            agent_run_id=call.agent_run_id, tool=call.manifest.tool_id, status="RUNNING",
            owner=self._owner, confidential=call.confidential,
            idempotency_key=call.idempotency_key, decision_id=call.decision_id,
            created_at=call.started_at, started_at=started, deadline_at=deadline,
            turn_id=call.turn_id,
        )
        entry = Entry(call=row, events=list(call.events), key=f"{call.call_id}:start:{call.decision_id}")
        await self._journal.note(entry)

    def requested(self, call: Call) -> None:
        """The call's agent.tool.requested event, first among its events, at the time it was
        asked for: built when first needed (while its tool runs, for a call that is
        executed) rather than before its decision, since it carries the arguments."""
        if call.requested_at is None:
            return
        at, call.requested_at = call.requested_at, None
        payload = {"tool": call.manifest.tool_id, **_args_view(call)}
        if call.parent_call_id is not None:
            payload["parent_call_id"] = call.parent_call_id
        call.events.insert(0, event(call.identity.team_id, "agent.tool.requested",
                                    run_id=call.agent_run_id, call_id=call.call_id,
                                    payload=payload, turn_id=call.turn_id, at=at))

    @staticmethod
    def emit(call: Call, type_: str, *, refs: dict[str, Any] | None = None,
             payload: dict[str, Any] | None = None, at: datetime | None = None) -> None:
        call.events.append(event(call.identity.team_id, type_, run_id=call.agent_run_id,
                                 call_id=call.call_id, refs=refs, payload=payload,
                                 turn_id=call.turn_id, at=at))


def _args_view(call: Call) -> dict[str, Any]:
    if call.confidential:
        digest, size = args_digest(call.args)
        return {"args_sha256": digest, "args_size": size}
    return {"args": call.args}
