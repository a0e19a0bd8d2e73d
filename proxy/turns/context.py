"""What an agent works with during a turn: its tool calls (through the pipeline, bounded, each
carrying the turn id), its steps and events, and its resumable state."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson
import structlog
from aiohttp import web

from pdp.digest import args_digest
from proxy.approval_flow import ApprovalFlow
from proxy.call import Outcome
from proxy.envelope import CallContext, InvokeRequest
from proxy.errors import ApiError
from proxy.events import event
from proxy.identity import Identity
from proxy.journal import Journal
from proxy.pipeline import Pipeline, error_outcome
from proxy.run_budget import BudgetUnavailable
from proxy.turns.models import Step, Turn
from proxy.turns.store import MAX_STATE_BYTES, TurnStore

log = structlog.get_logger("toolproxy.turns")

MAX_ARGS_IN_STEP = 2048  # a call's arguments kept in its step; larger ones by hash and size


class CallLimitReached(Exception):
    """The turn made its bound of tool calls."""


class TurnCancelled(Exception):
    """A cancellation was requested while the turn ran."""


class StateTooLarge(Exception):
    pass


def result_view(body: dict[str, Any]) -> dict[str, Any]:
    """A call's outcome as a step keeps it: a reference, never the output itself."""
    view: dict[str, Any] = {"status": body.get("status"), "call_id": body.get("call_id")}
    for key in ("result_id", "approval_id", "expires_at", "tokens_used", "cost_1t"):
        if body.get(key) is not None:
            view[key] = body[key]
    error = body.get("error")
    if isinstance(error, dict):
        view["code"] = error.get("code")
        if error.get("reasons"):
            view["reasons"] = error["reasons"]
    if body.get("ok") is True:
        view["output_bytes"] = len(orjson.dumps(body.get("output")))
    refs = {k: body[k] for k in ("artifacts", "object_refs", "observations", "provenance_refs")
            if body.get(k)}
    if refs:
        view["refs"] = refs
    return view


def args_view(args: Any) -> dict[str, Any]:
    encoded = orjson.dumps(args)
    if len(encoded) <= MAX_ARGS_IN_STEP:
        return {"args": args}
    digest, size = args_digest(args if isinstance(args, dict) else {"value": args})
    return {"args_sha256": digest, "args_size": size}


class TurnContext:
    def __init__(self, *, app: web.Application, identity: Identity, turn: Turn, store: TurnStore,
                 journal: Journal, pipeline: Pipeline, flow: ApprovalFlow, owner: str,
                 max_calls: int) -> None:
        self.app = app
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
            outcome = error_outcome(exc)
            await self.emit("agent.error", {"tool": tool, "code": exc.code, "message": exc.message[:500]})
        self.record_result(tool, outcome)
        return outcome

    def record_result(self, tool: str, outcome: Outcome, **extra: Any) -> None:
        view = {"tool": tool, "http_status": outcome.http_status, **result_view(outcome.body), **extra}
        kind = "authorization_required" if outcome.status == "AUTHORIZATION_REQUIRED" else "tool_result"
        self.step(kind, view, call_id=outcome.body.get("call_id"))

    async def resume_call(self, call_id: str) -> Outcome:
        """A held call, once decided: run (exactly once) if approved, its refusal otherwise;
        still pending, it stays held. Only the calling agent can resume (checked by the flow)."""
        try:
            return await self.flow.resume(self.identity, call_id, None)
        except ApiError as exc:
            return error_outcome(exc)

    async def withdraw(self, call_id: str) -> bool:
        """Cancel a held call of this turn (it ends CANCELLED, recorded like any call)."""
        return await self.flow.cancel_held(call_id, f"turn:{self.turn.turn_id}")

    async def add_tokens(self, tokens: int) -> None:
        """A model's token usage, counted to the turn (its run's `used` adds the turns' tokens)
        and to the run's budget counter when it has one, before the next step is checked."""
        if tokens <= 0:
            return
        self.turn.tokens_used += tokens
        try:
            await self.pipeline.budgets.add(self.turn.team_id, self.turn.run_id, tokens, 0.0)
        except BudgetUnavailable as exc:  # the turn's own count stands; the next check says more
            log.warning("turn_tokens_not_counted", turn_id=self.turn.turn_id, error=str(exc))
