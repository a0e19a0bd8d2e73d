"""What an agent works with during a turn: its tool calls (through the pipeline, bounded, each
carrying the turn id), its model calls (llm.chat, through the pipeline too), its steps and
events, and its resumable state."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson
from aiohttp import web

from wire.digest import args_digest
from proxy.core.approval_flow import ApprovalFlow
from proxy.core.envelope import CallContext, InvokeRequest
from proxy.core.outcome import HttpStatusOf, Outcome
from proxy.errors import ApiError
from proxy.records.events import event
from proxy.identity.identity import Identity
from proxy.records.journal import Journal
from proxy.core.pipeline import Pipeline
from proxy.turns.model_call import LLM_TOOL
from proxy.turns.models import Step, Turn
from proxy.turns.store import MAX_STATE_BYTES, TurnStore

MAX_ARGS_IN_STEP = 2048  # a call's arguments kept in its step; larger ones by hash and size


class CallLimitReached(Exception):
    """The turn made its bound of tool calls."""


class TurnCancelled(Exception):
    """A cancellation was requested while the turn ran."""


class StateTooLarge(Exception):
    pass


def result_view(o: Outcome) -> dict[str, Any]:
    """A call's outcome as a step keeps it: a reference, never the output itself."""
    view: dict[str, Any] = {"status": o.status or None, "call_id": o.call_id}
    metered = o.ok or o.executed  # the body states tokens and cost
    for key, value in (("result_id", o.result_id), ("approval_id", o.approval_id),
                       ("expires_at", o.expires_at), ("tokens_used", o.tokens_used if metered else None),
                       ("cost_1t", o.cost if metered else None)):
        if value is not None:
            view[key] = value
    if not o.ok:
        view["code"] = o.code
        if o.reasons:
            view["reasons"] = o.reasons
    else:
        view["output_bytes"] = len(orjson.dumps(o.output))
    refs = {k: o.refs[k] for k in _STEP_REFS if o.refs.get(k)}
    if refs:
        view["refs"] = refs
    return view


_STEP_REFS = ("artifacts", "object_refs", "observations", "provenance_refs")


def args_view(args: Any) -> dict[str, Any]:
    encoded = orjson.dumps(args)
    if len(encoded) <= MAX_ARGS_IN_STEP:
        return {"args": args}
    digest, size = args_digest(args if isinstance(args, dict) else {"value": args})
    return {"args_sha256": digest, "args_size": size}


class TurnContext:
    def __init__(self, *, app: web.Application, identity: Identity, turn: Turn, store: TurnStore,
                 journal: Journal, pipeline: Pipeline, flow: ApprovalFlow, owner: str,
                 max_calls: int, http_status: HttpStatusOf) -> None:
        self.app = app
        self.http_status = http_status  # how the native API answers an outcome (kept in steps)
        self.identity = identity
        self.turn = turn
        self.store = store
        self.journal = journal
        self.pipeline = pipeline
        self.flow = flow
        self.owner = owner
        self.max_calls = max_calls
        self._steps: list[Step] = []
        self.run_plan: Any = None  # the plan to publish on the run with the next flush

    @property
    def state(self) -> dict[str, Any]:
        return self.turn.state

    @property
    def calls_left(self) -> int:
        return max(0, self.max_calls - self.turn.calls_made)

    # --- steps, events, persistence ------------------------------------------------------

    def step(self, kind: str, body: dict[str, Any] | None = None, call_id: str | None = None) -> None:
        self._steps.append(Step(kind=kind, time=datetime.now(timezone.utc), body=body or {},
                                call_id=call_id))

    async def emit(self, type_: str, payload: dict[str, Any] | None = None, *,
                   refs: dict[str, Any] | None = None, call_id: str | None = None) -> None:
        """Durable (journal-acknowledged) before the turn goes on, so events keep their order."""
        ev = event(self.turn.team_id, type_, run_id=self.turn.run_id, call_id=call_id,
                   turn_id=self.turn.turn_id, refs=refs, payload=payload)
        await self.journal.record(events=[ev], key=ev.event_id)

    async def flush(self, *, status: str = "RUNNING", finished: bool = False) -> None:
        """Persist the steps so far and the state; stop here if a cancellation came in."""
        if len(orjson.dumps(self.turn.state)) > MAX_STATE_BYTES:
            raise StateTooLarge(f"the turn's state exceeds {MAX_STATE_BYTES} bytes")
        steps, self._steps = self._steps, []
        plan, self.run_plan = self.run_plan, None
        try:
            cancelled = await self.store.advance(self.turn, self.owner, steps, status=status,
                                                 finished=finished, run_plan=plan)
        except BaseException:
            self._steps, self.run_plan = steps + self._steps, self.run_plan or plan
            raise
        if cancelled and status == "RUNNING":
            raise TurnCancelled(self.turn.turn_id)

    # --- tool calls -------------------------------------------------------------------------

    def take_call(self) -> None:
        if self.turn.calls_made >= self.max_calls:
            raise CallLimitReached(f"the turn made its {self.max_calls} tool calls")
        self.turn.calls_made += 1

    @property
    def call_context(self) -> CallContext:
        return CallContext(agent_run_id=self.turn.run_id, team_id=self.turn.team_id)

    async def call_tool(self, tool: str, args: dict[str, Any]) -> Outcome:
        """One call through the whole pipeline (policy, limits, approvals, usage), as the
        caller, carrying this turn's id; recorded as a request step and a result step."""
        self.take_call()
        self.step("tool_request", {"tool": tool, **args_view(args)})
        request = InvokeRequest(tool=tool, args=args, context=self.call_context)
        try:
            outcome = await self.pipeline.invoke(self.identity, request, turn_id=self.turn.turn_id)
        except ApiError as exc:  # refused before a call existed: unknown tool, bad args
            outcome = Outcome.refused(exc)
            await self.emit("agent.error", {"tool": tool, "code": exc.code, "message": exc.message[:500]})
        self.record_result(tool, outcome)
        return outcome

    def record_result(self, tool: str, outcome: Outcome, **extra: Any) -> None:
        view = {"tool": tool, "http_status": self.http_status(outcome), **result_view(outcome),
                **extra}
        kind = "authorization_required" if outcome.status == "AUTHORIZATION_REQUIRED" else "tool_result"
        self.step(kind, view, call_id=outcome.call_id)

    async def resume_call(self, call_id: str) -> Outcome:
        """A held call, once decided: run (exactly once) if approved, its refusal otherwise;
        still pending, it stays held. Only the calling agent can resume (checked by the flow)."""
        try:
            return await self.flow.resume(self.identity, call_id, None)
        except ApiError as exc:
            return Outcome.refused(exc)

    async def withdraw(self, call_id: str) -> bool:
        """Cancel a held call of this turn (it ends CANCELLED, recorded like any call)."""
        return await self.flow.cancel_held(call_id, f"turn:{self.turn.turn_id}")

    async def ask_model(self, args: dict[str, Any]) -> Outcome:
        """The model agent's step: one llm.chat call through the whole pipeline, as the caller
        and in its run (proxy/turns/model_call.py says why it carries no turn id). Not one of
        the turn's tool calls; its tokens count to the turn (the pipeline counts them to the
        run's budget, the quotas and usage)."""
        request = InvokeRequest(tool=LLM_TOOL, args=args, context=self.call_context)
        try:
            outcome = await self.pipeline.invoke(self.identity, request)
        except ApiError as exc:  # refused before a call existed: e.g. a conversation too large
            outcome = Outcome.refused(exc)
        self.count_model(outcome)
        return outcome

    def count_model(self, outcome: Outcome) -> None:
        """A model call's tokens, counted to the turn (a held one's once it ran, on resume)."""
        if outcome.executed or outcome.ok:
            self.turn.tokens_used += max(0, outcome.tokens_used)
