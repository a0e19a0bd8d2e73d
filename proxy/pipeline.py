"""The invoke pipeline shared by every surface: validate, decide, forward, account, answer."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from nats.aio.client import Client as NATS

from pdp.approvals import ApprovalRepository
from pdp.decision import Decision
from pdp.decision_log import decision_record
from pdp.digest import args_digest
from pdp.point import PolicyDecisionPoint
from proxy.catalog import Catalog
from proxy.config import Settings
from proxy.envelope import InvokeRequest, completed_body
from proxy.errors import (
    ApiError,
    Denied,
    DependencyUnavailable,
    InvalidArgs,
    InvalidRequest,
    PdpUnavailable,
    ToolTimeout,
    ToolUnavailable,
    UnknownTool,
)
from proxy.forward import BadToolReply, CallMeta, cancel, forward
from proxy.identity import Identity
from proxy.journal import Journal
from proxy.limits.limiter import Limiter, LimitsUnavailable
from proxy.metrics import Metrics
from proxy.usage import UsageRecord
from services.sdk.manifest import ToolManifest, is_valid_tool_name

log = structlog.get_logger("toolproxy.pipeline")


@dataclass(slots=True)
class Outcome:
    """What a surface renders: an HTTP status, a JSON body, extra headers."""

    http_status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return str(self.body.get("status", ""))


@dataclass(slots=True)
class Call:
    """One call on its way through the pipeline (a resume is the same call, decided again)."""

    identity: Identity
    manifest: ToolManifest
    args: dict[str, Any]
    agent_run_id: str | None
    confidential: bool
    call_id: str
    decision_id: str
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    t0: float = field(default_factory=time.perf_counter)
    approval: dict[str, Any] | None = None  # the approval state the policy sees on resume

    @property
    def context(self) -> dict[str, Any]:
        return {
            "team_id": self.identity.team_id,
            "agent_run_id": self.agent_run_id,
            "confidential": self.confidential,
        }


@dataclass(slots=True)
class Ending:
    """How a call ended, before it is rendered and accounted."""

    http_status: int
    status: str
    code: str | None = None
    message: str = ""
    executed: bool = False
    result_id: str | None = None
    output: Any = None
    tokens: int = 0
    compute: float = 0.0
    cost: float = 0.0
    reasons: list[str] | None = None
    tool_code: str | None = None
    retry_after: float | None = None


class Pipeline:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        pdp: PolicyDecisionPoint,
        nc: NATS,
        journal: Journal,
        approvals: ApprovalRepository,
        limiter: Limiter,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.pdp = pdp
        self.nc = nc
        self.journal = journal
        self.approvals = approvals
        self.limiter = limiter
        self.metrics = metrics
        # Per manifest object (a catalog change replaces the object): the schema validator and
        # the tool's view in the policy input, built once instead of on every call.
        self._prepared: dict[str, tuple[ToolManifest, Draft202012Validator, dict[str, Any]]] = {}
        disabled = {p.strip() for p in settings.bench_disable.split(",") if p.strip()}
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

    def _prepare(self, m: ToolManifest) -> tuple[ToolManifest, Draft202012Validator, dict[str, Any]]:
        cached = self._prepared.get(m.tool_id)
        if cached is None or cached[0] is not m:
            cached = (m, Draft202012Validator(m.input_schema), m.model_dump(mode="json"))
            self._prepared[m.tool_id] = cached
        return cached

    def tool_view(self, manifest: ToolManifest) -> dict[str, Any]:
        return self._prepare(manifest)[2]

    def check_args(self, manifest: ToolManifest, args: dict[str, Any]) -> None:
        error = best_match(self._prepare(manifest)[1].iter_errors(args))
        if error is not None:
            message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
            raise InvalidArgs(
                f"args do not match {manifest.tool_id}'s input schema at {error.json_path}: {message}"
            )

    # --- list ---------------------------------------------------------------------------

    async def callable_tools(self, identity: Identity) -> list[ToolManifest]:
        """The catalog through the list-phase policy: a tool the caller may not call is absent.
        Every decision is logged; any PDP failure fails the whole listing (closed)."""
        if not self.pdp.ready:
            raise PdpUnavailable("the policy decision point is not ready")
        allowed: list[ToolManifest] = []
        records = []
        for m in self.catalog.manifests():
            decision, seconds, doc = await self.pdp.decide(
                decision_id=str(uuid.uuid4()),
                agent_id=identity.agent_id,
                team_id=identity.team_id,
                roles=identity.roles,
                tool=self.tool_view(m),
                args=None,
                context={"team_id": identity.team_id},
                phase="list",
            )
            self.metrics.pdp_duration.labels(engine=decision.engine, phase="list").observe(seconds)
            records.append(decision_record(
                decision, doc, team_id=identity.team_id, agent_id=identity.agent_id,
                roles=identity.roles, tool=m.tool_id, phase="list", latency_s=seconds, call_id=None))
            if decision.error_code is not None:
                self.metrics.pdp_errors.labels(code=decision.error_code).inc()
                await asyncio.shield(self.journal.record(decisions=records))
                raise PdpUnavailable("the policy decision point could not decide")
            if decision.allow:
                allowed.append(m)
        await asyncio.shield(self.journal.record(decisions=records))
        return allowed

    # --- invoke -------------------------------------------------------------------------

    async def invoke(self, identity: Identity, request: InvokeRequest) -> Outcome:
        ctx_team = request.context.team_id
        if ctx_team is not None and ctx_team != identity.team_id:
            raise Denied("context.team_id does not match the token's team", reasons=["team_mismatch"])
        manifest = self.resolve_tool(request.tool)
        self.check_args(manifest, request.args)
        call = Call(
            identity=identity,
            manifest=manifest,
            args=request.args,
            agent_run_id=request.context.agent_run_id,
            confidential=request.context.confidential,
            call_id=str(uuid.uuid4()),
            decision_id=str(uuid.uuid4()),
        )
        with self.bound(call):
            return await self.run(call)

    def bound(self, call: Call) -> Any:
        return structlog.contextvars.bound_contextvars(
            call_id=call.call_id,
            decision_id=call.decision_id,
            tool=call.manifest.tool_id,
            agent_id=call.identity.agent_id,
            team_id=call.identity.team_id,
        )

    async def run(self, call: Call) -> Outcome:
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
        self.metrics.pdp_duration.labels(engine=decision.engine, phase="call").observe(seconds)
        record = decision_record(
            decision, doc, team_id=call.identity.team_id, agent_id=call.identity.agent_id,
            roles=call.identity.roles, tool=call.manifest.tool_id, phase="call",
            latency_s=seconds, call_id=call.call_id,
        )
        if decision.error_code is not None:
            self.metrics.pdp_errors.labels(code=decision.error_code).inc()
            self.metrics.pdp_decisions.labels(phase="call", result="error").inc()
            ending = Ending(503, "UNAVAILABLE", decision.error_code,
                            "the policy decision point could not decide; nothing was executed",
                            reasons=decision.reasons)
            return await self._end(call, decision, ending, record)
        result = "allow" if decision.allow else "deny"
        self.metrics.pdp_decisions.labels(phase="call", result=result).inc()
        if not decision.allow:
            ending = Ending(403, "DENIED", "denied", "policy denied this call", reasons=decision.reasons)
            return await self._end(call, decision, ending, record)
        if decision.require_approval:
            if call.approval is not None:  # a resumed call must not need approval twice
                ending = Ending(403, "DENIED", "denied", "the approval does not cover this call",
                                reasons=decision.reasons)
                return await self._end(call, decision, ending, record)
            return await self._hold_for_approval(call, decision, record)
        return await self._execute(call, decision, record)

    async def _hold_for_approval(self, call: Call, decision: Decision, record: Any) -> Outcome:
        digest, size = args_digest(call.args)
        approval = await self.approvals.request(
            call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
            agent_id=call.identity.agent_id, agent_run_id=call.agent_run_id,
            tool=call.manifest.tool_id, args=call.args, args_hash=digest, args_size=size,
            confidential=call.confidential, reasons=decision.reasons,
            policy_revision=decision.policy_revision,
        )
        await asyncio.shield(self.journal.record(decisions=[record]))
        self.metrics.requests.labels(tool=call.manifest.tool_id, category=call.manifest.category,
                                     status="AUTHORIZATION_REQUIRED").inc()
        log.info("call_awaiting_approval", approval_id=approval.approval_id)
        return Outcome(202, authorization_required_body(
            call_id=call.call_id, decision_id=call.decision_id, approval_id=approval.approval_id,
            expires_at=approval.expires_at.isoformat(), reasons=decision.reasons))

    async def _admit(self, call: Call, decision: Decision) -> Ending | None:
        """Rate limits and quotas: None when admitted, else how the call ends (not forwarded)."""
        m = call.manifest
        if not self._limits_on:
            return None
        try:
            admission = await self.limiter.admit(
                team_id=call.identity.team_id, agent_id=call.identity.agent_id, tool=m.tool_id,
                category=m.category, rate=decision.obligations.rate,
            )
        except LimitsUnavailable as exc:
            self.metrics.limits_errors.inc()
            log.warning("limits_unavailable", error=str(exc))
            return Ending(503, "UNAVAILABLE", "limits_unavailable",
                          "rate limits could not be checked; nothing was executed")
        if admission.allowed:
            return None
        assert admission.code is not None and admission.reason is not None
        self.metrics.limited.labels(category=m.category, code=admission.code,
                                    reason=admission.reason).inc()
        message = ("rate limit reached for this tool" if admission.code == "rate_limited"
                   else "today's quota is used up")
        return Ending(429, "DENIED", admission.code, message, reasons=[admission.reason],
                      retry_after=admission.retry_after)

    async def _execute(self, call: Call, decision: Decision, record: Any) -> Outcome:
        refused = await self._admit(call, decision)
        if refused is not None:
            return await self._end(call, decision, refused, record)
        m = call.manifest
        timeout_ms = min(decision.obligations.timeout_ms or m.deadline_ms, m.deadline_ms)
        meta = CallMeta(
            call_id=call.call_id,
            decision_id=call.decision_id,
            team_id=call.identity.team_id,
            agent_id=call.identity.agent_id,
            run_id=call.agent_run_id,
            confidential=call.confidential,
        )
        try:
            reply = await forward(
                self.nc, m, call.args, meta,
                timeout_s=timeout_ms / 1000.0,
                max_reply_bytes=self.settings.max_output_bytes + 16_384,
                metrics=self.metrics,
            )
        except ToolTimeout as exc:
            ending = Ending(504, "FAILED", exc.code, exc.message, executed=True)
        except ToolUnavailable as exc:
            self.catalog.mark_unreachable(m.tool_id)
            ending = Ending(503, "UNAVAILABLE", exc.code, exc.message)
        except DependencyUnavailable as exc:
            ending = Ending(503, "UNAVAILABLE", exc.code, exc.message)
        except BadToolReply as exc:
            ending = Ending(200, "FAILED", "bad_tool_output", str(exc), executed=True)
        except asyncio.CancelledError:
            # The client went away (or the proxy is stopping): stop the tool, and record the
            # call as CANCELLED (499: nobody received a response) before giving up.
            await asyncio.shield(self._cancelled(call, decision, record, meta))
            raise
        else:
            cost = round(m.cost.price(reply.tokens_used, reply.compute_units), 12)
            self.limiter.settle(team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                                tokens=reply.tokens_used, compute=reply.compute_units, cost=cost)
            metering = dict(executed=True, result_id=str(uuid.uuid4()), tokens=reply.tokens_used,
                            compute=reply.compute_units, cost=cost)
            if reply.ok:
                ending = Ending(200, "COMPLETED", output=reply.output, **metering)  # type: ignore[arg-type]
            elif reply.error is not None and reply.error.code == "timeout":
                ending = Ending(504, "FAILED", "timeout", reply.error.message, **metering)  # type: ignore[arg-type]
            else:
                assert reply.error is not None
                ending = Ending(200, "FAILED", "tool_error", reply.error.message,
                                tool_code=reply.error.code, **metering)  # type: ignore[arg-type]
        return await self._end(call, decision, ending, record)

    async def _cancelled(self, call: Call, decision: Decision, record: Any, meta: CallMeta) -> None:
        await cancel(self.nc, call.manifest, meta)
        ending = Ending(499, "CANCELLED", "cancelled", "the client disconnected", executed=True)
        await self._end(call, decision, ending, record)

    async def _end(self, call: Call, decision: Decision, e: Ending, record: Any) -> Outcome:
        """Render the ending, make its usage and decision records durable, count it."""
        if e.status == "COMPLETED":
            assert e.result_id is not None
            body = completed_body(output=e.output, tokens_used=e.tokens, cost_1t=e.cost,
                                  call_id=call.call_id, result_id=e.result_id,
                                  decision_id=call.decision_id)
        else:
            error: dict[str, Any] = {"code": e.code, "message": e.message}
            if e.reasons is not None:
                error["reasons"] = e.reasons
            if e.tool_code is not None and e.tool_code != e.code:
                error["tool_code"] = e.tool_code
            body = {"ok": False, "status": e.status, "error": error,
                    "call_id": call.call_id, "decision_id": call.decision_id}
            if e.executed:
                if e.result_id is not None:
                    body["result_id"] = e.result_id
                body["tokens_used"] = e.tokens
                body["cost_1t"] = e.cost
            if e.retry_after is not None:
                error["retry_after_s"] = round(min(e.retry_after, 86_400.0), 3)
        elapsed = time.perf_counter() - call.t0
        m = call.manifest
        self.metrics.requests.labels(tool=m.tool_id, category=m.category, status=e.status).inc()
        if e.code is not None:
            self.metrics.errors.labels(reason=e.code).inc()
        self.metrics.request_duration.labels(tool=m.tool_id, category=m.category,
                                             status=e.status).observe(elapsed)
        usage = UsageRecord(
            call_id=call.call_id,
            result_id=e.result_id,
            decision_id=call.decision_id,
            team_id=call.identity.team_id,
            agent_id=call.identity.agent_id,
            agent_run_id=call.agent_run_id,
            tool=m.tool_id,
            category=m.category,
            action=m.action,
            decision="allow" if decision.allow else "deny",
            status=e.status,
            error_code=e.code,
            http_status=e.http_status,
            latency_ms=elapsed * 1000.0,
            tokens_used=e.tokens,
            compute_units=e.compute,
            cost_1t=e.cost,
            started_at=call.started_at,
            finished_at=datetime.now(timezone.utc),
        )
        # Shielded: a cancelled request (shutdown) still leaves its records behind.
        if self._journal_on:
            await asyncio.shield(self.journal.record(usage=usage, decisions=[record]))
        log.info("call_finished", status=e.status, code=e.code, http_status=e.http_status,
                 latency_ms=round(elapsed * 1000.0, 3), policy_revision=decision.policy_revision,
                 reasons=decision.reasons)
        headers = {}
        if e.retry_after is not None:
            # Whole seconds, rounded up: a client waiting this long is admitted.
            headers["Retry-After"] = str(max(1, math.ceil(min(e.retry_after, 86_400.0))))
        return Outcome(e.http_status, body, headers)


def authorization_required_body(*, call_id: str, decision_id: str, approval_id: str,
                                expires_at: str, reasons: list[str]) -> dict[str, Any]:
    return {
        "ok": False,
        "status": "AUTHORIZATION_REQUIRED",
        "error": {
            "code": "authorization_required",
            "message": "a governance approval is required; resume the call once it is approved",
            "reasons": reasons,
        },
        "approval_id": approval_id,
        "expires_at": expires_at,
        "call_id": call_id,
        "decision_id": decision_id,
    }


def error_outcome(exc: ApiError) -> Outcome:
    return Outcome(exc.http_status, exc.body(), dict(exc.headers))
