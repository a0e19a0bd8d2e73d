"""Executing a decided call: admitted, handed to its tool over NATS (what the request does not
need is done meanwhile), stopped when cancelled or abandoned, and ended from the reply."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from nats.aio.client import Client as NATS

from infra import tracing
from infra.nats_inbox import Inbox, Interrupted, Meanwhile
from pdp.decision_log import DecisionRecord
from proxy.config import Settings
from proxy.core.binding import approval_meta
from proxy.core.call import Call, Ending
from proxy.core.errors import CallTooLargeForBus, ToolTimeout, ToolUnavailable
from proxy.core.forward import BadToolReply, CallMeta, cancel, forward
from proxy.core.inflight import InFlight
from proxy.core.outcome import Outcome
from proxy.core.signing import ContextSigner
from proxy.core.pipeline.admission import Admission, Reservation
from proxy.core.pipeline.decide import Decided
from proxy.core.pipeline.ending import Endings
from proxy.core.pipeline.records import Records
from proxy.errors import ApiError, DependencyUnavailable
from proxy.metrics import Metrics
from proxy.records.calls import result_id_for
from wire.digest import args_digest
from wire.protocol import ToolReply


class ForwardHook(Protocol):
    """Told of every call handed to its tool, and of its end (the plugin relay keeps its
    running plugin calls so: proxy.core.plugins.calls)."""

    def forwarding(self, call: Call, deadline: float) -> None: ...  # deadline: epoch seconds

    def done(self, call: Call) -> None: ...


class Execute:
    def __init__(self, *, settings: Settings, nc: NATS, inbox: Inbox, inflight: InFlight,
                 metrics: Metrics, admission: Admission, endings: Endings, records: Records,
                 hook: ForwardHook | None, signer: ContextSigner) -> None:
        self._settings = settings
        self._signer = signer
        self._nc = nc
        self._inbox = inbox
        self._inflight = inflight
        self._metrics = metrics
        self._admission = admission
        self._endings = endings
        self._records = records
        self._hook = hook

    async def __call__(self, d: Decided) -> Outcome:
        call, decision = d.call, d.decision
        m = call.manifest
        timeout_ms = min(decision.obligations.timeout_ms or m.deadline_ms, m.deadline_ms)
        if call.deadline is not None:  # an internal call lives within its plugin call's deadline
            left_ms = int((call.deadline - time.time()) * 1000)
            if left_ms <= 0:
                ending = Ending("FAILED", "timeout", "the plugin call's deadline has passed")
                return await self._records.end(call, decision, ending, d.record())
            timeout_ms = min(timeout_ms, left_ms)
        reservation = self._admission.reservation(call)
        try:
            with tracing.span("admit"):
                refused = await reservation.hold(decision)
            if refused is None and call.fence is not None:
                try:
                    await call.fence()
                except ApiError as exc:  # its idempotency key is not this request's any more
                    await reservation.release(executed=False)
                    refused = Ending(exc.status or "UNAVAILABLE", exc.code, exc.message,
                                     retry_after=1.0)
        except asyncio.CancelledError:
            # The client went away before the call was handed to its tool: nothing ran, what
            # admission took is given back, and the call is recorded CANCELLED.
            reservation.give_back()
            ending = Ending("CANCELLED", "cancelled",
                            "the client disconnected before the call was forwarded",
                            disconnected=True)
            await asyncio.shield(self._records.end(call, decision, ending, d.record()))
            raise
        if refused is not None:
            return await self._records.end(call, decision, refused, d.record())
        meta = CallMeta(
            call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, run_id=call.agent_run_id, confidential=call.confidential,
            **approval_meta(call.approval),
            replica=self._inflight.instance_id if m.plugin else None, turn_id=call.turn_id,
        )
        started = call.forwarded_at = datetime.now(timezone.utc)
        cancel_requested = self._inflight.watch(call.call_id, call.identity.team_id)
        hook = self._hook
        if hook is not None:
            hook.forwarding(call, time.time() + timeout_ms / 1000.0)
        record: DecisionRecord | None = None
        note: asyncio.TimerHandle | None = None
        records = self._records

        def while_forwarding() -> None:
            # What the request to the tool does not need, done while the tool works (at one
            # connection it then adds no latency; see infra.nats_inbox.Meanwhile).
            nonlocal record, note
            records.requested(call)
            record = d.record()
            records.emit(call, "agent.tool.started", at=started,
                         payload={"tool": m.tool_id, "timeout_ms": timeout_ms})
            note = records.start_note(call, started, started + timedelta(milliseconds=timeout_ms))
            call.args_digest = args_digest(call.args)
            call.result_id = result_id_for(call.call_id)

        later = Meanwhile(while_forwarding)
        try:
            try:
                reply, notes = await self._forward(call, meta, timeout_ms, cancel_requested, later)
            except Interrupted:
                # Cancelled through the API (from any replica) before the reply came: stop the
                # tool; the caller, still connected, gets CANCELLED.
                await cancel(self._nc, m, meta)
                ending = Ending("CANCELLED", "cancelled",
                                f"cancelled by {cancel_requested.result() or 'request'}", executed=True)
            except (ToolTimeout, ToolUnavailable, DependencyUnavailable, BadToolReply,
                    CallTooLargeForBus) as exc:
                ending = self._endings.no_reply(call, exc)
            else:
                ending = await self._ending(call, reply, notes, reservation)
        except asyncio.CancelledError:
            # The client went away (or the proxy is stopping): stop the tool, and record the
            # call as CANCELLED (nobody received a response) before giving up.
            ending = Ending("CANCELLED", "cancelled", "the client disconnected", executed=True,
                            disconnected=True)
            assert record is not None
            await asyncio.shield(self._abandoned(d, ending, record, meta, reservation))
            raise
        finally:
            self._inflight.unwatch(call.call_id)
            if hook is not None:
                hook.done(call)
            if note is not None:
                note.cancel()
        assert record is not None
        await reservation.release(executed=ending.executed)
        return await records.end(call, decision, ending, record)

    async def _forward(self, call: Call, meta: CallMeta, timeout_ms: int,
                       interrupt: asyncio.Future[Any], later: Meanwhile) -> tuple[ToolReply, list[str]]:
        """The tool's reply (or what `forward` raises); `later` is done by the time it returns
        or raises."""
        try:
            with tracing.span("forward"):
                return await forward(
                    self._inbox, call.manifest, call.args, meta, timeout_s=timeout_ms / 1000.0,
                    max_reply_bytes=self._settings.max_artifact_bytes, metrics=self._metrics,
                    interrupt=interrupt, meanwhile=later, signer=self._signer)
        finally:
            later.finish()

    async def _ending(self, call: Call, reply: ToolReply, notes: list[str],
                      reservation: Reservation) -> Ending:
        busy = self._endings.busy(reply, call.manifest.tool_id)
        if busy is not None:
            return busy
        cost = self._endings.cost(call, reply)
        reservation.settle(reply.tokens_used, reply.compute_units, cost)
        return await self._endings.from_reply(call, reply, notes, cost)

    async def _abandoned(self, d: Decided, ending: Ending, record: DecisionRecord, meta: CallMeta,
                         reservation: Reservation) -> None:
        await cancel(self._nc, d.call.manifest, meta)
        await reservation.release(executed=True)
        await self._records.end(d.call, d.decision, ending, record)
