"""Driving turns: start one (in its run), resume it once its held calls are decided, cancel it;
each drive is a task the app owns, so a client that goes away does not stop its turn."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import datetime, timezone
from typing import Any

import structlog
from aiohttp import web

from infra.lifecycle import cancel_and_wait
from proxy.core.approval_flow import ApprovalFlow
from proxy.core.errors import ToolUnavailable
from proxy.config import Settings
from proxy.errors import ApiError, Forbidden, NotFound
from proxy.records.events import event
from proxy.identity.identity import Identity
from proxy.records.journal import Journal
from proxy.core.outcome import HttpStatusOf
from proxy.core.pipeline import Pipeline
from proxy.records.runs import RunExists
from proxy.turns.context import CallLimitReached, StateTooLarge, TurnCancelled, TurnContext
from proxy.turns.demo import DemoAgent
from proxy.turns.errors import ModelNotConfigured, RunCompleted, TurnNotHeld, TurnNotRunning
from proxy.turns.model_agent import ModelAgent
from proxy.turns.model_call import LLM_TOOL
from proxy.turns.models import FINAL, Done, Failed, Held, StartTurn, Step, Turn, Verdict
from proxy.turns.store import TurnLost, TurnStore, iso

log = structlog.get_logger("toolproxy.turns")

CANCEL_WAIT_S = 3.0
INTERRUPTED = {"code": "turn_interrupted",
               "message": "the proxy replica driving this turn stopped; start a new turn"}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def brief(turn: Turn) -> dict[str, Any]:
    """POST /v1/turns and resume: where the turn stands."""
    out: dict[str, Any] = {"turn_id": turn.turn_id, "run_id": turn.run_id, "agent": turn.agent,
                           "status": turn.status, "calls_made": turn.calls_made,
                           "tokens_used": turn.tokens_used}
    if turn.held:
        out["authorization"] = turn.held
    if turn.result is not None:
        out["result"] = turn.result
    if turn.error is not None:
        out["error"] = turn.error
    return out


class TurnRuntime:
    def __init__(self, app: web.Application, *, settings: Settings, pipeline: Pipeline,
                 flow: ApprovalFlow, journal: Journal, http_status: HttpStatusOf) -> None:
        self.app = app
        self.http_status = http_status
        self.settings = settings
        self.pipeline = pipeline
        self.flow = flow
        self.journal = journal
        self.store = TurnStore(pipeline.pool)
        self.agents = {"demo": DemoAgent(), "model": ModelAgent(settings.turn_model)}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def owner(self) -> str:
        return self.pipeline.inflight.instance_id

    # --- the routes' operations -------------------------------------------------------------

    async def start(self, identity: Identity, body: StartTurn) -> tuple[int, dict[str, Any]]:
        if body.agent == "model" and not self.pipeline.catalog.available(LLM_TOOL):
            # Its steps are llm.chat calls. Never announced: this stack has no model agent (a
            # client error, asking again cannot help); announced but with no responder now: a
            # passing outage, worth a retry.
            if self.pipeline.catalog.get(LLM_TOOL) is not None:
                raise ToolUnavailable("llm.chat, the model agent's steps, has no responder right "
                                      "now; try again shortly", headers={"Retry-After": "1"})
            raise ModelNotConfigured("no model upstream is configured: the model agent's steps are "
                                     "llm.chat calls, and no service serves llm.chat "
                                     "(TOOLPROXY_LLM_BASE_URL, TOOLPROXY_LLM_MODELS)")
        run_id = await self._run_for(identity, body.run_id)
        turn = Turn(turn_id=str(uuid.uuid4()), team_id=identity.team_id, agent_id=identity.agent_id,
                    run_id=run_id, agent=body.agent, status="RUNNING", input=body.input)
        turn = await self.store.create(turn, self.owner,
                                       [Step("user", _now(), {"input": body.input})])
        ctx = self._context(identity, turn)
        await ctx.emit("agent.turn.started", {"agent": body.agent, "input": body.input[:500],
                                              "input_chars": len(body.input)})
        return await self._answer(identity, self._spawn(ctx), turn.turn_id, 201)

    async def resume(self, identity: Identity, turn_id: str) -> tuple[int, dict[str, Any]]:
        turn = await self._own(identity, turn_id)
        if turn.status != "AUTHORIZATION_REQUIRED":
            raise TurnNotHeld(f"the turn is {turn.status}, not held for an authorization")
        if not await self._decided(turn):
            return 202, brief(turn)
        claimed = await self.store.claim(identity.team_id, turn_id, self.owner)
        if claimed is None:  # another resume (or a cancel) got there first
            current = await self._own(identity, turn_id)
            raise TurnNotHeld(f"the turn is {current.status}, not held for an authorization")
        return await self._answer(identity, self._spawn(self._context(identity, claimed)),
                                  turn_id, 200)

    async def cancel(self, identity: Identity, turn_id: str) -> tuple[int, dict[str, Any]]:
        """Only the turn's agent or its team's governance. A held turn ends CANCELLED at once
        (its held calls withdrawn); a running one stops at its next step, on any replica."""
        turn = await self.store.get(identity.team_id, turn_id)
        if turn is None:
            raise NotFound("no such turn")
        if turn.agent_id != identity.agent_id and not identity.is_governance:
            raise Forbidden("only the turn's agent or its team's governance may cancel it")
        if turn.status in FINAL:
            raise TurnNotRunning(f"the turn already ended {turn.status}")
        by = f"{identity.role}:{identity.agent_id}"
        await self.store.request_cancel(identity.team_id, turn_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT_S
        while True:
            current = await self.store.get(identity.team_id, turn_id)
            assert current is not None
            if current.status in FINAL:
                return 200, brief(current)
            if current.status == "AUTHORIZATION_REQUIRED":
                ended = await self._cancel_held(current, by)
                if ended is not None:
                    return 200, brief(ended)
            if loop.time() >= deadline:
                return 202, {**brief(current), "cancel_requested": True}
            await asyncio.sleep(0.05)

    async def _cancel_held(self, turn: Turn, by: str) -> Turn | None:
        """A held turn ends CANCELLED (once), and its held calls are withdrawn."""
        error = {"code": "cancelled", "message": f"cancelled by {by}"}
        ended = await self.store.end_held(turn.team_id, turn.turn_id, "CANCELLED", error,
                                          [Step("error", _now(), error)])
        if ended is None:
            return None
        await self._withdraw(turn.held, by)
        await self._record(ended, "agent.turn.completed", self._completed_payload(ended))
        return ended

    async def _withdraw(self, held: list[dict[str, Any]], by: str) -> None:
        for h in held:
            with contextlib.suppress(ApiError):
                await self.flow.cancel_held(str(h["call_id"]), by)

    async def view(self, identity: Identity, turn_id: str) -> dict[str, Any]:
        turn = await self.store.get(identity.team_id, turn_id)
        if turn is None:
            raise NotFound("no such turn")
        return {**brief(turn), "agent_id": turn.agent_id, "input": turn.input,
                "max_calls": self.settings.turn_max_calls,
                "steps": await self.store.steps(turn_id), "created_at": iso(turn.created_at),
                "updated_at": iso(turn.updated_at), "finished_at": iso(turn.finished_at)}

    # --- helpers of the operations --------------------------------------------------------------

    async def _own(self, identity: Identity, turn_id: str) -> Turn:
        """The caller's own turn; another agent's turn does not exist for a resume (404)."""
        turn = await self.store.get(identity.team_id, turn_id)
        if turn is None or turn.agent_id != identity.agent_id:
            raise NotFound("no such turn")
        return turn

    async def _run_for(self, identity: Identity, run_id: str | None) -> str:
        """The turn's run: the caller's named run, created when absent, or a new one."""
        runs = self.pipeline.runs
        run_id = run_id or f"run_{uuid.uuid4().hex[:20]}"
        run = await runs.get(identity.team_id, run_id)
        if run is None:
            try:
                await runs.create(team_id=identity.team_id, run_id=run_id,
                                  agent_id=identity.agent_id, max_calls=None, max_tokens=None,
                                  max_cost_1t=None)
                # known here at once (other replicas learn it by NOTIFY); no budget, no counter
                await self.pipeline.budgets.register(identity.team_id, run_id, max_calls=None,
                                                     max_tokens=None, max_cost_1t=None)
                return run_id
            except RunExists:
                run = await runs.get(identity.team_id, run_id)
                assert run is not None
        if run["agent_id"] != identity.agent_id:
            raise Forbidden("the run belongs to another agent")
        if run["status"] == "completed":
            raise RunCompleted(f"run {run_id!r} is completed")
        return run_id

    async def _decided(self, turn: Turn) -> bool:
        """Whether any held call has moved on (decided, expired, ended): worth a resume."""
        if not turn.held:
            return True
        for h in turn.held:
            found = await self.flow.approvals.for_call(str(h["call_id"]))
            if found is None:
                return True
            approval, stored = found
            if approval.state != "pending" or approval.expires_at <= _now() or stored.response:
                return True
        return False

    def _context(self, identity: Identity, turn: Turn) -> TurnContext:
        return TurnContext(app=self.app, identity=identity, turn=turn, store=self.store,
                           journal=self.journal, pipeline=self.pipeline, flow=self.flow,
                           owner=self.owner, max_calls=self.settings.turn_max_calls,
                           http_status=self.http_status)

    def _spawn(self, ctx: TurnContext) -> asyncio.Task[None]:
        task = asyncio.create_task(self._drive(ctx), name=f"turn-{ctx.turn.turn_id}")
        self._tasks[ctx.turn.turn_id] = task
        task.add_done_callback(lambda _t, tid=ctx.turn.turn_id: self._tasks.pop(tid, None))
        return task

    async def _answer(self, identity: Identity, task: asyncio.Task[None], turn_id: str,
                      http_status: int) -> tuple[int, dict[str, Any]]:
        """Once the turn rests, or after turn_wait_s (202: still running; poll or follow events)."""
        if self.settings.turn_wait_s > 0:
            await asyncio.wait({task}, timeout=self.settings.turn_wait_s)
        turn = await self.store.get(identity.team_id, turn_id)
        assert turn is not None
        return (202 if turn.status == "RUNNING" else http_status), brief(turn)

    # --- one drive of a turn ------------------------------------------------------------------

    async def _drive(self, ctx: TurnContext) -> None:
        agent = self.agents[ctx.turn.agent]
        log_ = log.bind(turn_id=ctx.turn.turn_id, run_id=ctx.turn.run_id, agent=ctx.turn.agent)
        try:
            try:
                verdict: Verdict = await agent.run(ctx)
            except CallLimitReached as exc:
                verdict = Failed("call_limit_reached", str(exc))
            except StateTooLarge as exc:
                verdict = Failed("turn_too_large", str(exc))
            except ApiError as exc:  # e.g. the policy could not list the tools
                verdict = Failed(exc.code, exc.message)
            await self._settle(ctx, verdict)
        except TurnCancelled:
            await self._withdraw(ctx.turn.held, f"turn:{ctx.turn.turn_id}")
            await self._end(ctx, "CANCELLED", {"code": "cancelled", "message": "cancelled on request"})
        except TurnLost:
            log_.warning("turn_taken_away")
        except asyncio.CancelledError:
            # The proxy is stopping: the turn cannot go on here; record why, then give up.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._end(ctx, "FAILED", INTERRUPTED))
            raise
        except Exception:
            log_.exception("turn_failed")
            with contextlib.suppress(Exception):
                await self._end(ctx, "FAILED", {"code": "internal_error", "message": "internal error"})

    async def _settle(self, ctx: TurnContext, verdict: Verdict) -> None:
        if isinstance(verdict, Held):
            ctx.turn.held = verdict.calls
            await ctx.flush()  # a cancellation that came in meanwhile wins over the hold
            await ctx.flush(status="AUTHORIZATION_REQUIRED")
            log.info("turn_held", turn_id=ctx.turn.turn_id, calls=len(verdict.calls))
        elif isinstance(verdict, Done):
            ctx.turn.result, ctx.turn.held = verdict.result, []
            ctx.step("result", {"result": verdict.result})
            await ctx.flush(status="COMPLETED", finished=True)
            await ctx.emit("agent.turn.completed", self._completed_payload(ctx.turn))
        else:
            await self._end(ctx, "FAILED", {"code": verdict.code, "message": verdict.message})

    async def _end(self, ctx: TurnContext, status: str, error: dict[str, Any]) -> None:
        ctx.turn.error, ctx.turn.held = error, []
        ctx.step("error", error)
        await ctx.emit("agent.error", error)
        try:
            await ctx.flush(status=status, finished=True)
        except TurnLost:
            return
        await ctx.emit("agent.turn.completed", self._completed_payload(ctx.turn))

    @staticmethod
    def _completed_payload(turn: Turn) -> dict[str, Any]:
        payload: dict[str, Any] = {"status": turn.status, "calls_made": turn.calls_made,
                                   "tokens_used": turn.tokens_used}
        if turn.error is not None:
            payload["code"] = turn.error.get("code")
        if turn.result is not None:
            payload["result"] = turn.result
        return payload

    async def _record(self, turn: Turn, type_: str, payload: dict[str, Any]) -> None:
        ev = event(turn.team_id, type_, run_id=turn.run_id, turn_id=turn.turn_id, payload=payload)
        await self.journal.record(events=[ev], key=ev.event_id)

    # --- lost turns and shutdown ----------------------------------------------------------------

    async def resolve_lost(self) -> int:
        """RUNNING turns of a replica that stopped heartbeating end FAILED `turn_interrupted`."""
        lost = await self.store.resolve_lost(self.settings.lost_after_s, INTERRUPTED)
        for turn in lost:
            await self._record(turn, "agent.error", INTERRUPTED)
            await self._record(turn, "agent.turn.completed", self._completed_payload(turn))
        if lost:
            log.warning("lost_turns_resolved", count=len(lost))
        return len(lost)

    def start_sweeper(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.settings.housekeeping_every_s)
                try:
                    await self.resolve_lost()
                except Exception as exc:  # Postgres away: the next round tries again
                    log.warning("turn_sweep_failed", error=str(exc))

        self._sweeper = asyncio.create_task(loop(), name="turn-sweeper")

    async def close(self) -> None:
        await cancel_and_wait(self._sweeper)
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
