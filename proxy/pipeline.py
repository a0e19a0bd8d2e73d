"""The invoke pipeline shared by every surface: validate, decide, forward, account, answer."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from nats.aio.client import Client as NATS

from pdp.decision import Decision
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
    ToolTimeout,
    ToolUnavailable,
    UnknownTool,
)
from proxy.forward import BadToolReply, CallMeta, forward
from proxy.identity import Identity
from proxy.metrics import Metrics
from proxy.usage import UsageRecord, UsageRecorder
from services.sdk.manifest import ToolManifest, is_valid_tool_name

log = structlog.get_logger("toolproxy.pipeline")


@dataclass(slots=True)
class Outcome:
    """What a surface renders: an HTTP status, a JSON body, extra headers."""

    http_status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Call:
    identity: Identity
    manifest: ToolManifest
    request: InvokeRequest
    call_id: str
    decision_id: str
    started_at: datetime
    t0: float


class Pipeline:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        pdp: PolicyDecisionPoint,
        nc: NATS,
        usage: UsageRecorder,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.pdp = pdp
        self.nc = nc
        self.usage = usage
        self.metrics = metrics
        # Per manifest object (a catalog change replaces the object): the schema validator and
        # the tool's view in the policy input, built once instead of on every call.
        self._prepared: dict[str, tuple[ToolManifest, Draft202012Validator, dict[str, Any]]] = {}

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

    def _prepare(self, manifest: ToolManifest) -> tuple[ToolManifest, Draft202012Validator, dict[str, Any]]:
        cached = self._prepared.get(manifest.tool_id)
        if cached is None or cached[0] is not manifest:
            cached = (manifest, Draft202012Validator(manifest.input_schema),
                      manifest.model_dump(mode="json"))
            self._prepared[manifest.tool_id] = cached
        return cached

    def tool_view(self, manifest: ToolManifest) -> dict[str, Any]:
        return self._prepare(manifest)[2]

    def check_args(self, manifest: ToolManifest, args: dict[str, Any]) -> None:
        error = best_match(self._prepare(manifest)[1].iter_errors(args))
        if error is not None:
            where = error.json_path
            message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
            raise InvalidArgs(f"args do not match {manifest.tool_id}'s input schema at {where}: {message}")

    # --- the pipeline -------------------------------------------------------------------

    async def invoke(self, identity: Identity, request: InvokeRequest) -> Outcome:
        ctx_team = request.context.team_id
        if ctx_team is not None and ctx_team != identity.team_id:
            raise Denied("context.team_id does not match the token's team", reasons=["team_mismatch"])
        manifest = self.resolve_tool(request.tool)
        self.check_args(manifest, request.args)
        call = _Call(
            identity=identity,
            manifest=manifest,
            request=request,
            call_id=str(uuid.uuid4()),
            decision_id=str(uuid.uuid4()),
            started_at=datetime.now(timezone.utc),
            t0=time.perf_counter(),
        )
        with structlog.contextvars.bound_contextvars(
            call_id=call.call_id,
            decision_id=call.decision_id,
            tool=manifest.tool_id,
            agent_id=identity.agent_id,
            team_id=identity.team_id,
        ):
            return await self._decided(call)

    async def _decided(self, call: _Call) -> Outcome:
        m = call.manifest
        context = call.request.context.model_dump()
        context["team_id"] = call.identity.team_id
        decision, seconds, _ = await self.pdp.decide(
            decision_id=call.decision_id,
            agent_id=call.identity.agent_id,
            team_id=call.identity.team_id,
            roles=call.identity.roles,
            tool=self.tool_view(m),
            args=call.request.args,
            context=context,
            phase="call",
        )
        self.metrics.pdp_duration.labels(engine=decision.engine, phase="call").observe(seconds)
        if decision.error_code is not None:
            self.metrics.pdp_errors.labels(code=decision.error_code).inc()
            self.metrics.pdp_decisions.labels(phase="call", result="error").inc()
            return await self._finish(
                call, decision, 503, "UNAVAILABLE", decision.error_code,
                "the policy decision point could not decide; nothing was executed",
            )
        self.metrics.pdp_decisions.labels(phase="call", result="allow" if decision.allow else "deny").inc()
        if not decision.allow:
            return await self._finish(
                call, decision, 403, "DENIED", "denied", "policy denied this call",
            )
        if decision.require_approval:
            # Approvals arrive with the governance issue; until then, never execute such a call.
            return await self._finish(
                call, decision, 403, "DENIED", "denied",
                "this call needs a governance approval, which this deployment cannot grant yet",
                reasons=decision.reasons + ["approval_required"],
            )
        return await self._execute(call, decision)

    async def _execute(self, call: _Call, decision: Decision) -> Outcome:
        m = call.manifest
        timeout_ms = min(decision.obligations.timeout_ms or m.deadline_ms, m.deadline_ms)
        meta = CallMeta(
            call_id=call.call_id,
            decision_id=call.decision_id,
            team_id=call.identity.team_id,
            agent_id=call.identity.agent_id,
            run_id=call.request.context.agent_run_id,
            confidential=call.request.context.confidential,
        )
        try:
            reply = await forward(
                self.nc, m, call.request.args, meta,
                timeout_s=timeout_ms / 1000.0,
                max_reply_bytes=self.settings.max_output_bytes + 16_384,
                metrics=self.metrics,
            )
        except ToolTimeout as exc:
            return await self._finish(call, decision, 504, "FAILED", exc.code, exc.message, executed=True)
        except ToolUnavailable as exc:
            self.catalog.mark_unreachable(m.tool_id)
            return await self._finish(call, decision, 503, "UNAVAILABLE", exc.code, exc.message)
        except DependencyUnavailable as exc:
            return await self._finish(call, decision, 503, "UNAVAILABLE", exc.code, exc.message)
        except BadToolReply as exc:
            return await self._finish(
                call, decision, 200, "FAILED", "bad_tool_output", str(exc), executed=True
            )
        result_id = str(uuid.uuid4())
        cost = round(m.cost.price(reply.tokens_used, reply.compute_units), 12)
        if not reply.ok:
            assert reply.error is not None
            if reply.error.code == "timeout":
                return await self._finish(
                    call, decision, 504, "FAILED", "timeout", reply.error.message,
                    executed=True, result_id=result_id, tokens=reply.tokens_used,
                    compute=reply.compute_units, cost=cost,
                )
            return await self._finish(
                call, decision, 200, "FAILED", "tool_error", reply.error.message,
                executed=True, result_id=result_id, tokens=reply.tokens_used,
                compute=reply.compute_units, cost=cost, tool_code=reply.error.code,
            )
        body = completed_body(
            output=reply.output,
            tokens_used=reply.tokens_used,
            cost_1t=cost,
            call_id=call.call_id,
            result_id=result_id,
            decision_id=call.decision_id,
        )
        await self._account(call, decision, "COMPLETED", None, 200, result_id, reply.tokens_used,
                            reply.compute_units, cost)
        return Outcome(200, body)

    async def _finish(
        self,
        call: _Call,
        decision: Decision,
        http_status: int,
        status: str,
        code: str,
        message: str,
        *,
        executed: bool = False,
        result_id: str | None = None,
        tokens: int = 0,
        compute: float = 0.0,
        cost: float = 0.0,
        reasons: list[str] | None = None,
        tool_code: str | None = None,
    ) -> Outcome:
        error: dict[str, Any] = {"code": code, "message": message}
        if status == "DENIED" or decision.error_code is not None:
            error["reasons"] = reasons if reasons is not None else decision.reasons
        if tool_code is not None and tool_code != code:
            error["tool_code"] = tool_code
        body: dict[str, Any] = {"ok": False, "status": status, "error": error,
                                "call_id": call.call_id, "decision_id": call.decision_id}
        if executed:
            if result_id is not None:
                body["result_id"] = result_id
            body["tokens_used"] = tokens
            body["cost_1t"] = cost
        await self._account(call, decision, status, code, http_status, result_id, tokens, compute, cost)
        return Outcome(http_status, body)

    async def _account(
        self,
        call: _Call,
        decision: Decision,
        status: str,
        code: str | None,
        http_status: int,
        result_id: str | None,
        tokens: int,
        compute: float,
        cost: float,
    ) -> None:
        elapsed = time.perf_counter() - call.t0
        m = call.manifest
        self.metrics.requests.labels(tool=m.tool_id, category=m.category, status=status).inc()
        self.metrics.request_duration.labels(tool=m.tool_id, category=m.category, status=status).observe(elapsed)
        record = UsageRecord(
            call_id=call.call_id,
            result_id=result_id,
            decision_id=call.decision_id,
            team_id=call.identity.team_id,
            agent_id=call.identity.agent_id,
            agent_run_id=call.request.context.agent_run_id,
            tool=m.tool_id,
            category=m.category,
            action=m.action,
            decision="allow" if decision.allow else "deny",
            status=status,
            error_code=code,
            http_status=http_status,
            latency_ms=elapsed * 1000.0,
            tokens_used=tokens,
            compute_units=compute,
            cost_1t=cost,
            started_at=call.started_at,
            finished_at=datetime.now(timezone.utc),
        )
        # Shielded: a cancelled request (shutdown) still leaves its usage record behind.
        await asyncio.shield(self.usage.record(record))
        log.info("call_finished", status=status, code=code, http_status=http_status,
                 latency_ms=round(elapsed * 1000.0, 3), policy_revision=decision.policy_revision,
                 reasons=decision.reasons)


def error_outcome(exc: ApiError) -> Outcome:
    return Outcome(exc.http_status, exc.body(), dict(exc.headers))
