"""The invoke pipeline shared by every surface: validate, decide, admit, forward, account."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS

from pdp.approvals import ApprovalRepository
from pdp.decision import Decision
from pdp.decision_log import DecisionRecord, decision_record
from pdp.digest import args_digest
from pdp.point import PolicyDecisionPoint
from pdp.standing import StandingApprovals
from proxy import tracing
from proxy.args.checker import ArgsChecker
from proxy.accounting import call_record, kept_body, terminal_event, usage_record
from proxy.binding import approval_meta, prepare_held
from proxy.call import (
    Call,
    Ending,
    Outcome,
    authorization_required_body,
    render,
    tool_error_status,
)
from proxy.calls import CallRecord, result_id_for
from proxy.catalog import Catalog
from proxy.config import Settings
from proxy.envelope import InvokeRequest
from proxy.errors import (
    ApiError,
    Conflict,
    Denied,
    DependencyUnavailable,
    InvalidRequest,
    PdpUnavailable,
    ToolTimeout,
    ToolUnavailable,
    UnknownTool,
)
from proxy.events import event, tool_events
from proxy.forward import BadToolReply, CallMeta, cancel, forward
from proxy.ids import new_id
from proxy.idempotency import IdempotencyStore, intent_hash
from proxy.identity import Identity
from proxy.inbox import Inbox, Interrupted, Meanwhile
from proxy.inflight import InFlight
from proxy.journal import Entry, Journal
from proxy.limits.limiter import Admission, Limiter, LimitsUnavailable
from proxy.metrics import Metrics
from proxy.output import schema_problem, shape_output
from proxy.plugins.calls import PluginCalls
from proxy.run_budget import BudgetUnavailable, RunBudgets
from proxy.runs import RunRepository
from services.sdk import log_context
from services.sdk.protocol import PLUGIN_ERROR_CODES
from services.sdk.manifest import ToolManifest, is_valid_tool_name
from services.sdk.protocol import BUSY, ToolReply
from services.sdk.validation import SchemaValidator

log = structlog.get_logger("toolproxy.pipeline")

__all__ = ["Call", "Outcome", "Pipeline", "authorization_required_body", "error_outcome"]


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"


class IdempotencyInProgress(Conflict):
    code = "idempotency_in_progress"


class Pipeline:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        pdp: PolicyDecisionPoint,
        nc: NATS,
        inbox: Inbox,
        pool: asyncpg.Pool,
        journal: Journal,
        approvals: ApprovalRepository,
        limiter: Limiter,
        idempotency: IdempotencyStore,
        runs: RunRepository,
        budgets: RunBudgets,
        inflight: InFlight,
        metrics: Metrics,
        standing: StandingApprovals | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.pdp = pdp
        self.nc = nc
        self.inbox = inbox
        self.pool = pool
        self.journal = journal
        self.approvals = approvals
        self.limiter = limiter
        self.idempotency = idempotency
        self.runs = runs
        self.budgets = budgets
        self.inflight = inflight
        self.metrics = metrics
        self.standing = standing
        # Per manifest object (a catalog change replaces the object): the validators and the
        # tool's view in the policy input, built once instead of on every call.
        self._prepared: dict[str, tuple[ToolManifest, ArgsChecker, SchemaValidator,
                                        dict[str, Any]]] = {}
        self.plugin_calls = PluginCalls()  # this replica's running plugin calls (internal())
        self._notes: set[asyncio.Task[None]] = set()
        disabled = settings.disabled_parts()
        self._limits_on = "limits" not in disabled
        self._journal_on = "journal" not in disabled
        if disabled:
            log.warning("benchmark_mode_parts_disabled", disabled=sorted(disabled))

    # --- the steps before a call exists -------------------------------------------------

    def resolve_tool(self, name: str) -> ToolManifest:
        """Name shape first (no wildcard, path or look-alike reaches the catalog), then catalog."""
        if not is_valid_tool_name(name):
            raise InvalidRequest(
                "tool name must be lowercase ASCII words separated by dots, at most 64 chars"
            )
        manifest = self.catalog.get(name)
        if manifest is None:
            raise UnknownTool(f"no tool named {name!r}")
        return manifest

    def _prepare(self, m: ToolManifest) -> tuple[ToolManifest, ArgsChecker,
                                                 SchemaValidator, dict[str, Any]]:
        cached = self._prepared.get(m.tool_id)
        if cached is None or cached[0] is not m:
            cached = (m, ArgsChecker(m), SchemaValidator(m.output_schema),
                      m.model_dump(mode="json"))
            self._prepared[m.tool_id] = cached
        return cached

    def tool_view(self, manifest: ToolManifest) -> dict[str, Any]:
        return self._prepare(manifest)[3]

    def check_args(self, manifest: ToolManifest, args: dict[str, Any],
                   body_bytes: int | None = None) -> None:
        """Size bound, then input schema (proxy/args): bounded work before anything else."""
        self._prepare(manifest)[1].check(args, body_bytes)

    # --- list ---------------------------------------------------------------------------

    async def callable_tools(self, identity: Identity) -> list[ToolManifest]:
        """The catalog through the list-phase policy: a tool the caller may not call is absent.
        Every decision is logged; any PDP failure fails the whole listing (closed)."""
        if not self.pdp.ready:
            raise PdpUnavailable("the policy decision point is not ready")
        allowed: list[ToolManifest] = []
        records: list[DecisionRecord] = []
        try:
            for m in self.catalog.manifests():
                decision, seconds, doc = await self.pdp.decide(
                    decision_id=str(uuid.uuid4()), agent_id=identity.agent_id,
                    team_id=identity.team_id, roles=identity.roles, tool=self.tool_view(m),
                    args=None, context={"team_id": identity.team_id}, phase="list",
                )
                self.metrics.pdp_duration.labels(engine=decision.engine, phase="list").observe(seconds)
                records.append(decision_record(
                    decision, doc, team_id=identity.team_id, agent_id=identity.agent_id,
                    roles=identity.roles, tool=m.tool_id, phase="list", latency_s=seconds,
                    call_id=None))
                if decision.error_code is not None:
                    self.metrics.pdp_errors.labels(code=decision.error_code).inc()
                    raise PdpUnavailable("the policy decision point could not decide")
                if decision.allow:
                    allowed.append(m)
        finally:
            if self._journal_on and records:
                await self.journal.record(decisions=records)  # durable even if cancelled
        return allowed

    # --- invoke -------------------------------------------------------------------------

    async def invoke(self, identity: Identity, request: InvokeRequest,
                     body_bytes: int | None = None, *, turn_id: str | None = None) -> Outcome:
        ctx_team = request.context.team_id
        if ctx_team is not None and ctx_team != identity.team_id:
            raise Denied("context.team_id does not match the token's team", reasons=["team_mismatch"])
        with tracing.span("validate"):
            manifest = self.resolve_tool(request.tool)
            self.check_args(manifest, request.args, body_bytes)
        call = Call(
            identity=identity,
            manifest=manifest,
            args=request.args,
            agent_run_id=request.context.agent_run_id,
            confidential=request.context.confidential,
            call_id=new_id(),
            decision_id=new_id(),
            turn_id=turn_id,
        )
        tracing.annotate(call_id=call.call_id, decision_id=call.decision_id, tool=manifest.tool_id)
        with self.bound(call):
            if request.idempotency_key is None:
                return await self.run(call)
            return await self._idempotent(call, request.idempotency_key)

    async def _idempotent(self, call: Call, key: str) -> Outcome:
        """Claimed atomically per team: one execution per key; a replay gets the original
        response; the same key with another intent is a conflict; while the first run is
        still going, a replay is told so (409) rather than kept waiting."""
        team = call.identity.team_id
        intent = intent_hash(call.manifest.tool_id, call.args,
                             {"agent_run_id": call.agent_run_id, "confidential": call.confidential})
        claim = await self.idempotency.claim(team, key, intent, call.call_id)
        if claim.conflict:
            raise IdempotencyConflict("this idempotency key was used for a different call")
        if claim.in_progress:
            raise IdempotencyInProgress("a call with this idempotency key is still running")
        if not claim.owned:
            return await self._replay(claim.call_id, claim.http_status, claim.response)
        call.idempotency_key = key
        try:
            outcome, ending = await self._run(call)
        except BaseException:
            await asyncio.shield(self.idempotency.release(team, key, call.call_id))
            raise
        if ending is not None and ending.transient:
            await self.idempotency.release(team, key, call.call_id)
        else:
            await asyncio.shield(self.idempotency.complete(
                team, key, call.call_id, outcome.http_status,
                kept_body(outcome.body, call.confidential)))
        return outcome

    async def _replay(self, call_id: str, http_status: int | None, body: dict[str, Any] | None) -> Outcome:
        assert body is not None and http_status is not None
        if body.get("status") == "AUTHORIZATION_REQUIRED":
            # The call may have moved on since (approved and resumed, denied, expired).
            row = await self.pool.fetchrow(
                "SELECT http_status, response FROM calls WHERE call_id = $1 AND response IS NOT NULL",
                uuid.UUID(call_id))
            if row is not None:
                http_status, body = row["http_status"], row["response"]
        return Outcome(http_status, body, {"Idempotent-Replayed": "true"})

    def bound(self, call: Call) -> Any:
        return log_context.bound(
            call_id=call.call_id,
            decision_id=call.decision_id,
            tool=call.manifest.tool_id,
            agent_id=call.identity.agent_id,
            team_id=call.identity.team_id,
        )

    async def run(self, call: Call) -> Outcome:
        return (await self._run(call))[0]

    async def run_ending(self, call: Call) -> tuple[Outcome, Ending | None]:
        """The outcome and how the call ended (None while it is held for an approval)."""
        return await self._run(call)

    async def _run(self, call: Call) -> tuple[Outcome, Ending | None]:
        if not call.resumed:
            call.requested_at = datetime.now(timezone.utc)  # its event: see _requested
        if self.standing is not None and call.approval is None and call.manifest.requires_approval:
            call.approval = await self.standing.claim(  # a standing approval, counted; else None
                team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                tool=call.manifest.tool_id, args=call.args)
        with tracing.span("decide"):
            decision, seconds, doc = await self.pdp.decide(
                decision_id=call.decision_id,
                agent_id=call.identity.agent_id,
                team_id=call.identity.team_id,
                roles=call.identity.roles,
                tool=self.tool_view(call.manifest),
                args=call.args,
                context=call.context,
                phase="call",
                approval=call.approval,
            )
        self.metrics.child(self.metrics.pdp_duration, decision.engine, "call").observe(seconds)
        decided_at = datetime.now(timezone.utc)

        def make_record() -> DecisionRecord:
            # Built when needed: an executed call builds it while its tool runs.
            return decision_record(
                decision, doc, team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                roles=call.identity.roles, tool=call.manifest.tool_id, phase="call",
                latency_s=seconds, call_id=call.call_id, at=decided_at,
            )

        if decision.error_code is not None:
            self.metrics.pdp_errors.labels(code=decision.error_code).inc()
            self.metrics.child(self.metrics.pdp_decisions, "call", "error").inc()
            ending = Ending(503, "UNAVAILABLE", decision.error_code,
                            "the policy decision point could not decide; nothing was executed",
                            reasons=decision.reasons)
            return await self._end(call, decision, ending, make_record()), ending
        self.metrics.child(self.metrics.pdp_decisions, "call",
                           "allow" if decision.allow else "deny").inc()
        if not decision.allow:
            ending = Ending(403, "DENIED", "denied", "policy denied this call", reasons=decision.reasons)
            return await self._end(call, decision, ending, make_record()), ending
        if decision.require_approval:
            if call.parent_call_id is not None:
                # A plugin's internal call cannot wait for a governance decision: it runs under
                # its plugin call's approval (inherited) or not at all.
                ending = Ending(403, "DENIED", "denied", "an internal call of a plugin needs the "
                                "approval of the plugin's own call", reasons=decision.reasons)
                return await self._end(call, decision, ending, make_record()), ending
            if call.approval is not None:  # a resumed call must not need approval twice
                ending = Ending(403, "DENIED", "denied", "the approval does not cover this call",
                                reasons=decision.reasons)
                return await self._end(call, decision, ending, make_record()), ending
            return await self._hold_for_approval(call, decision, make_record())
        return await self._execute(call, decision, make_record)

    async def _hold_for_approval(self, call: Call, decision: Decision,
                                 record: DecisionRecord) -> tuple[Outcome, Ending | None]:
        self._requested(call)
        preview, refused = await prepare_held(self.inbox, call, self.metrics)
        if refused is not None:
            return await self._end(call, decision, refused, record), refused
        digest, size = args_digest(call.args)
        approval = await self.approvals.request(
            call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, agent_run_id=call.agent_run_id,
            tool=call.manifest.tool_id, args=call.args, args_hash=digest, args_size=size,
            confidential=call.confidential, reasons=decision.reasons,
            policy_revision=decision.policy_revision, preview=preview, turn_id=call.turn_id,
        )
        self._emit(call, "agent.authorization.required",
                   refs={"approval_id": approval.approval_id},
                   payload={"tool": call.manifest.tool_id, "reasons": decision.reasons})
        if self._journal_on:
            await self.journal.record(  # durable even if cancelled
                decisions=[record], events=call.events, key=f"{call.call_id}:held")
        self.metrics.requests.labels(tool=call.manifest.tool_id, category=call.manifest.category,
                                     status="AUTHORIZATION_REQUIRED").inc()
        log.info("call_awaiting_approval", approval_id=approval.approval_id)
        return Outcome(202, authorization_required_body(
            call_id=call.call_id, decision_id=call.decision_id, approval_id=approval.approval_id,
            expires_at=approval.expires_at.isoformat(), reasons=decision.reasons)), None

    # --- admission: run budget, rate limits, quotas --------------------------------------

    async def _admit(self, call: Call, decision: Decision) -> Ending | None:
        """None when admitted, else how the call ends (it is not forwarded)."""
        m = call.manifest
        if call.agent_run_id is not None:
            try:
                refusal = await self.budgets.reserve(call.identity.team_id, call.agent_run_id)
            except BudgetUnavailable:
                return Ending(503, "UNAVAILABLE", "dependency_unavailable",
                              "the run's budget could not be checked; nothing was executed")
            if refusal is not None:
                message = ("the run is completed" if refusal == "run_completed"
                           else "the run's budget is used up")
                return Ending(403, "DENIED", refusal, message, reasons=[refusal])
            info = self.budgets.known(call.identity.team_id, call.agent_run_id)
            call.run_reserved = info is not None and info.budgeted
        if not self._limits_on:
            return None
        try:
            # A metered tool's estimated tokens are held first: refused here, nothing else was
            # taken; refused below, they are given back.
            not_held = await self._hold_tokens(call)
            if not_held is not None:
                admission = not_held
            else:
                admission = await self.limiter.admit(
                    team_id=call.identity.team_id, agent_id=call.identity.agent_id, tool=m.tool_id,
                    category=m.category, rate=decision.obligations.rate,
                )
        except LimitsUnavailable as exc:
            self.metrics.limits_errors.inc()
            log.warning("limits_unavailable", error=str(exc))
            refused = Ending(503, "UNAVAILABLE", "limits_unavailable",
                             "rate limits could not be checked; nothing was executed")
        else:
            if admission.allowed:
                return None
            assert admission.code is not None and admission.reason is not None
            self.metrics.limited.labels(category=m.category, code=admission.code,
                                        reason=admission.reason).inc()
            message = ("rate limit reached for this tool" if admission.code == "rate_limited"
                       else "today's token quota cannot hold this call's estimate"
                       if admission.reason == "quota_tokens_estimate" else "today's quota is used up")
            refused = Ending(429, "DENIED", admission.code, message, reasons=[admission.reason],
                             retry_after=admission.retry_after)
        self._release_tokens(call)
        if call.run_reserved:
            await self.budgets.release(call.identity.team_id, call.agent_run_id or "")
            call.run_reserved = False
        return refused

    async def _hold_tokens(self, call: Call) -> Admission | None:
        """Reserve the tool's declared token estimate against the daily token quotas: None
        when held (or nothing to hold), else the refusal."""
        estimate = call.manifest.token_estimate
        if estimate is None:
            return None
        held = await self.limiter.reserve_tokens(
            team_id=call.identity.team_id, agent_id=call.identity.agent_id,
            tokens=estimate.tokens(call.args))
        if not held.allowed:
            return Admission(False, "quota_exceeded", "quota_tokens_estimate", held.retry_after)
        if held.tokens:
            call.tokens_held = held
        return None

    def _release_tokens(self, call: Call, tokens: int = 0) -> None:
        """Settle held tokens to `tokens` (0: the call never ran; nothing was used)."""
        if call.tokens_held is not None:
            held, call.tokens_held = call.tokens_held, None
            self.limiter.settle(team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                                tokens=tokens, compute=0.0, cost=0.0, reserved=held)

    # --- execution ------------------------------------------------------------------------

    async def _execute(self, call: Call, decision: Decision,
                       make_record: Callable[[], DecisionRecord]) -> tuple[Outcome, Ending]:
        m = call.manifest
        timeout_ms = min(decision.obligations.timeout_ms or m.deadline_ms, m.deadline_ms)
        if call.deadline is not None:  # an internal call lives within its plugin call's deadline
            left_ms = int((call.deadline - time.time()) * 1000)
            if left_ms <= 0:
                ending = Ending(504, "FAILED", "timeout", "the plugin call's deadline has passed")
                return await self._end(call, decision, ending, make_record()), ending
            timeout_ms = min(timeout_ms, left_ms)
        with tracing.span("admit"):
            refused = await self._admit(call, decision)
        if refused is not None:
            return await self._end(call, decision, refused, make_record()), refused
        meta = CallMeta(
            call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, run_id=call.agent_run_id, confidential=call.confidential,
            **approval_meta(call.approval),
            replica=self.inflight.instance_id if m.plugin else None, turn_id=call.turn_id,
        )
        started = call.forwarded_at = datetime.now(timezone.utc)
        cancel_requested = self.inflight.watch(call.call_id, call.identity.team_id)
        if m.plugin:
            self.plugin_calls.add(call, time.time() + timeout_ms / 1000.0)
        record: DecisionRecord | None = None
        note: asyncio.TimerHandle | None = None

        def while_forwarding() -> None:
            # What the request to the tool does not need, done while the tool works (at one
            # connection it then adds no latency; see proxy.inbox.Meanwhile).
            nonlocal record, note
            self._requested(call)
            record = make_record()
            self._emit(call, "agent.tool.started", at=started,
                       payload={"tool": m.tool_id, "timeout_ms": timeout_ms})
            note = self._start_note(call, started, started + timedelta(milliseconds=timeout_ms))
            call.args_digest = args_digest(call.args)
            call.result_id = result_id_for(call.call_id)

        later = Meanwhile(while_forwarding)
        try:
            try:
                reply, notes = await self._forward(call, meta, timeout_ms, cancel_requested, later)
            except Interrupted:
                # Cancelled through the API (from any replica) before the reply came: stop the
                # tool; the caller, still connected, gets 200 CANCELLED.
                await cancel(self.nc, m, meta)
                ending = Ending(200, "CANCELLED", "cancelled",
                                f"cancelled by {cancel_requested.result() or 'request'}", executed=True)
            except (ToolTimeout, ToolUnavailable, DependencyUnavailable, BadToolReply) as exc:
                ending = self._forward_failed(call, exc)
            else:
                ending = await self._ending_from(call, reply, notes)
        except asyncio.CancelledError:
            # The client went away (or the proxy is stopping): stop the tool, and record the
            # call as CANCELLED (499: nobody received a response) before giving up.
            ending = Ending(499, "CANCELLED", "cancelled", "the client disconnected", executed=True)
            assert record is not None
            await asyncio.shield(self._cancelled(call, decision, ending, record, meta))
            raise
        finally:
            self.inflight.unwatch(call.call_id)
            self.plugin_calls.remove(call.call_id)
            if note is not None:
                note.cancel()
        assert record is not None
        return await self._end(call, decision, ending, record), ending

    async def _forward(self, call: Call, meta: CallMeta, timeout_ms: int,
                       interrupt: asyncio.Future[Any], later: Meanwhile) -> tuple[ToolReply, list[str]]:
        """The tool's reply (or what `forward` raises); `later` is done by the time it returns
        or raises."""
        try:
            with tracing.span("forward"):
                return await forward(
                    self.inbox, call.manifest, call.args, meta, timeout_s=timeout_ms / 1000.0,
                    max_reply_bytes=self.settings.max_artifact_bytes, metrics=self.metrics,
                    interrupt=interrupt, meanwhile=later)
        finally:
            later.finish()

    def _forward_failed(self, call: Call, exc: Exception) -> Ending:
        """The ending of a call whose tool gave no reply to use."""
        if isinstance(exc, ToolTimeout):
            return Ending(504, "FAILED", exc.code, exc.message, executed=True)
        if isinstance(exc, ToolUnavailable):
            self.catalog.mark_unreachable(call.manifest.tool_id)
            return Ending(503, "UNAVAILABLE", exc.code, exc.message)
        if isinstance(exc, DependencyUnavailable):
            return Ending(503, "UNAVAILABLE", exc.code, exc.message)
        return Ending(200, "FAILED", "bad_tool_output", str(exc), executed=True)

    async def _ending_from(self, call: Call, reply: ToolReply, notes: list[str]) -> Ending:
        m = call.manifest
        if not reply.ok and reply.error is not None and reply.error.code == BUSY:
            # The service refused before running it: this team's share of it is in use.
            return Ending(503, "UNAVAILABLE", "tool_busy", reply.error.message, retry_after=1.0)
        cost = round(m.cost.price(reply.tokens_used, reply.compute_units), 12)
        held, call.tokens_held = call.tokens_held, None
        self.limiter.settle(team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                            tokens=reply.tokens_used, compute=reply.compute_units, cost=cost,
                            reserved=held)
        if call.run_reserved:
            self.budgets.settle(call.identity.team_id, call.agent_run_id or "", reply.tokens_used, cost)
        refs = {"object_refs": reply.object_refs, "artifacts": list(reply.artifacts),
                "observations": reply.observations, "provenance_refs": reply.provenance_refs}
        # Set while the tool ran (its reply comes only after the forward's Meanwhile is done).
        assert call.result_id is not None
        e = Ending(200, "FAILED", executed=True, result_id=call.result_id, tokens=reply.tokens_used,
                   compute=reply.compute_units, cost=cost, diagnostics=list(notes), refs=refs)
        if not reply.ok:
            assert reply.error is not None
            if reply.error.code == "timeout":
                e.http_status, e.code, e.message = 504, "timeout", reply.error.message
            elif m.plugin and reply.error.code in PLUGIN_ERROR_CODES:
                # A plugin's own ending is reported as such (the sandbox's stable codes).
                e.code, e.message = reply.error.code, reply.error.message
                if e.code == "plugin_timeout":
                    e.http_status = 504
            else:
                e.code, e.message, e.tool_code = "tool_error", reply.error.message, reply.error.code
                e.http_status = tool_error_status(reply.error.code)
            return e
        problem = schema_problem(self._prepare(m)[2], reply.output)
        if problem is not None:
            e.code, e.message = "bad_tool_output", problem
            return e
        if call.confidential:
            # Confidential outputs are never stored: no artifact; too large is an error.
            size = len(orjson.dumps(reply.output))
            if size > self.settings.max_output_bytes:
                e.code = "output_too_large"
                e.message = (f"a confidential call's output of {size} bytes exceeds the "
                             f"{self.settings.max_output_bytes}-byte bound and cannot be kept aside")
                return e
        shaped = await shape_output(self.pool, reply.output, team_id=call.identity.team_id,
                                    call_id=call.call_id,
                                    max_inline_bytes=self.settings.max_output_bytes)
        e.status, e.code, e.output = "COMPLETED", None, shaped.output
        e.diagnostics.extend(shaped.diagnostics)
        # Domain events the tool reported (template.updated...): written with the call's own
        # events, in the same journal entry, only because it completed.
        events, notes = tool_events(call.identity.team_id, m.tool_id, reply.observations,
                                    run_id=call.agent_run_id, call_id=call.call_id,
                                    confidential=call.confidential)
        call.events.extend(events)
        e.diagnostics.extend(notes)
        if shaped.artifact is not None:
            e.refs["artifacts"] = [shaped.artifact, *e.refs["artifacts"]]
        return e

    async def _cancelled(self, call: Call, decision: Decision, ending: Ending,
                         record: DecisionRecord, meta: CallMeta) -> None:
        await cancel(self.nc, call.manifest, meta)
        await self._end(call, decision, ending, record)

    # --- the end of every call --------------------------------------------------------------

    async def _end(self, call: Call, decision: Decision, e: Ending,
                   record: DecisionRecord | None) -> Outcome:
        """Render the ending; make its usage, row, decision and events durable; count it."""
        self._requested(call)
        # Tokens still held: the call ended without a tool reply. Executed (a timeout, a
        # cancel), the estimate stays charged; never run, it is given back.
        if call.tokens_held is not None:
            self._release_tokens(call, call.tokens_held.tokens if e.executed else 0)
        body = render(call, e)
        if self.standing is not None and not e.executed:
            self.standing.refund(call.approval)  # a standing approval's call that never ran
        elapsed = time.perf_counter() - call.t0
        finished = datetime.now(timezone.utc)
        call.events.append(terminal_event(call, e, elapsed))
        # An approved call refused for now on its resume (429, 503: nothing ran) is not over:
        # its approval still stands, so it gets no ending row and no usage row yet — only its
        # decision and events. Its one usage row comes when it really ends.
        over = not (call.resumed and e.transient)
        usage = usage_record(call, decision, e, elapsed, finished) if over else None
        row = call_record(call, e, body, owner=self.inflight.instance_id, elapsed_s=elapsed,
                          finished=finished) if over else None
        m = call.manifest

        def counted() -> None:
            # Not part of the records: done while the stream stores them (proxy.inbox.Meanwhile).
            self.metrics.child(self.metrics.requests, m.tool_id, m.category, e.status).inc()
            if e.code is not None:
                self.metrics.child(self.metrics.errors, e.code).inc()
            self.metrics.child(self.metrics.request_duration, m.tool_id, m.category,
                               e.status).observe(elapsed)
            log.info("call_finished", status=e.status, code=e.code, http_status=e.http_status,
                     latency_ms=round(elapsed * 1000.0, 3),
                     policy_revision=decision.policy_revision, reasons=decision.reasons)

        later = Meanwhile(counted)
        try:
            # A cancelled request (shutdown) still leaves its records behind: Journal.record
            # sees to that.
            if self._journal_on:
                with tracing.span("record"):
                    await self.journal.record(
                        usage=usage, call=row, decisions=[record] if record is not None else [],
                        events=call.events, meanwhile=later)
        finally:
            later.finish()
        headers = {}
        if e.retry_after is not None:
            # Whole seconds, rounded up: a client waiting this long is admitted.
            headers["Retry-After"] = str(max(1, math.ceil(min(e.retry_after, 86_400.0))))
        return Outcome(e.http_status, body, headers)

    async def end_unexecuted(self, call: Call, ending: Ending) -> Outcome:
        """End a call that never reached its tool, outside the policy (e.g. a held call
        cancelled by its agent): recorded like any other ending."""
        # Not a policy decision: nothing goes to the decision log for it.
        decision = Decision(allow=True, decision_id=call.decision_id, engine=self.pdp.engine.name,
                            policy_revision=self.pdp.revision, reasons=["cancelled"])
        with self.bound(call):
            return await self._end(call, decision, ending, None)

    # --- records along the way ---------------------------------------------------------------

    def _start_note(self, call: Call, started: datetime,
                    deadline: datetime) -> asyncio.TimerHandle | None:
        """A call's RUNNING row (so other replicas see it running, and resolve it if this one
        dies) — only for a call still running after `start_note_after_ms`: a short call's end
        record says everything, in one publish. A call with an idempotency key is noted at once
        (a replay after a crash must find it)."""
        if not self._journal_on:
            return None
        after = self.settings.start_note_after_ms / 1000.0
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
            owner=self.inflight.instance_id, confidential=call.confidential,
            idempotency_key=call.idempotency_key, decision_id=call.decision_id,
            created_at=call.started_at, started_at=started, deadline_at=deadline,
            turn_id=call.turn_id,
        )
        entry = Entry(call=row, events=list(call.events), key=f"{call.call_id}:start:{call.decision_id}")
        await self.journal.note(entry)

    def _requested(self, call: Call) -> None:
        """The call's agent.tool.requested event, first among its events, at the time it was
        asked for: built when first needed (while its tool runs, for a call that is
        executed) rather than before its decision, since it carries the arguments."""
        if call.requested_at is None:
            return
        at, call.requested_at = call.requested_at, None
        payload = {"tool": call.manifest.tool_id, **self._args_view(call)}
        if call.parent_call_id is not None:
            payload["parent_call_id"] = call.parent_call_id
        call.events.insert(0, event(call.identity.team_id, "agent.tool.requested",
                                    run_id=call.agent_run_id, call_id=call.call_id,
                                    payload=payload, turn_id=call.turn_id, at=at))

    def _emit(self, call: Call, type_: str, *, refs: dict[str, Any] | None = None,
              payload: dict[str, Any] | None = None, at: datetime | None = None) -> None:
        call.events.append(event(call.identity.team_id, type_, run_id=call.agent_run_id,
                                 call_id=call.call_id, refs=refs, payload=payload,
                                 turn_id=call.turn_id, at=at))

    def _args_view(self, call: Call) -> dict[str, Any]:
        if call.confidential:
            digest, size = args_digest(call.args)
            return {"args_sha256": digest, "args_size": size}
        return {"args": call.args}


def error_outcome(exc: ApiError) -> Outcome:
    return Outcome(exc.http_status, exc.body(), dict(exc.headers))
