"""The invoke pipeline shared by every surface: the conductor that takes a call through its
stages (validate, idempotency, decide, hold or admit and execute, end) and answers an Outcome."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import asyncpg
import structlog
from nats.aio.client import Client as NATS

from infra import log_context, tracing
from infra.ids import new_id
from infra.nats_inbox import Inbox
from pdp.data.approvals import ApprovalRepository
from pdp.data.standing import StandingApprovals
from pdp.decision import Decision
from pdp.point import PolicyDecisionPoint
from proxy.config import Settings
from proxy.core.bus_bound import check_fits
from proxy.core.call import Call, Ending
from proxy.core.catalog import Catalog
from proxy.core.envelope import InvokeRequest
from proxy.core.errors import Denied
from proxy.core.idempotency import IdempotencyStore
from proxy.core.signing import ContextSigner
from proxy.core.inflight import InFlight
from proxy.core.limits.limiter import Limiter
from proxy.core.outcome import HttpStatusOf, Outcome
from proxy.core.pipeline.admission import Admission
from proxy.core.pipeline.decide import Decide
from proxy.core.pipeline.ending import Endings
from proxy.core.pipeline.execute import Execute, ForwardHook
from proxy.core.pipeline.hold import Hold
from proxy.core.pipeline.idempotency import Idempotent
from proxy.core.pipeline.listing import Listing
from proxy.core.pipeline.prepared import Prepared
from proxy.core.pipeline.records import Records
from proxy.core.run_budget import RunBudgets
from proxy.identity.identity import Identity
from proxy.metrics import Metrics
from proxy.records.journal import Journal
from proxy.records.runs import RunRepository
from wire.manifest import ToolManifest

log = structlog.get_logger("toolproxy.pipeline")


class Pipeline:
    """What every surface calls. `http_status`: how the native surface answers an outcome,
    which the records keep; `hook`: told of each call handed to its tool (the plugin relay)."""

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
        http_status: HttpStatusOf,
        standing: StandingApprovals | None = None,
        hook: ForwardHook | None = None,
        signer: ContextSigner,
    ) -> None:
        # Reached through the pipeline by the layers above until their own rework (the turn
        # runtime: pool, runs, budgets, inflight; the calls routes: inflight; MCP: catalog).
        self.catalog = catalog
        self.pool = pool
        self.runs = runs
        self.budgets = budgets
        self.inflight = inflight
        self._nc = nc
        self._pdp = pdp
        self._prepared = prepared = Prepared(catalog)
        self._listing = Listing(catalog=catalog, pdp=pdp, prepared=prepared, journal=journal,
                                metrics=metrics)
        self._records = records = Records(
            settings=settings, journal=journal, metrics=metrics, owner=inflight.instance_id,
            http_status=http_status, standing=standing)
        self._decide = Decide(pdp=pdp, prepared=prepared, metrics=metrics, standing=standing)
        self._hold = Hold(inbox=inbox, approvals=approvals, journal=journal, records=records,
                          metrics=metrics, signer=signer)
        self._execute = Execute(
            settings=settings, nc=nc, inbox=inbox, inflight=inflight, metrics=metrics,
            admission=Admission(limiter=limiter, budgets=budgets, metrics=metrics),
            endings=Endings(settings=settings, pool=pool, catalog=catalog, prepared=prepared),
            records=records, hook=hook, signer=signer)
        self._idempotent = Idempotent(store=idempotency, pool=pool, journal=journal,
                                      http_status=http_status, lost_after_s=settings.lost_after_s)

    # --- the steps before a call exists -------------------------------------------------

    def resolve_tool(self, name: str) -> ToolManifest:
        return self._prepared.resolve(name)

    def check_args(self, manifest: ToolManifest, args: dict[str, Any],
                   body_bytes: int | None = None) -> None:
        self._prepared.check_args(manifest, args, body_bytes)
        check_fits(self._nc, args, body_bytes)

    async def callable_tools(self, identity: Identity,
                             only: Collection[str] | None = None) -> list[ToolManifest]:
        """The catalog through the list-phase policy: a tool the caller may not call is absent.
        `only`: the tools the endpoint serves (a tool set)."""
        return await self._listing.callable_tools(identity, only)

    async def refuse_outside(self, identity: Identity, tool: str, toolset: str) -> None:
        """Log the refusal of a call outside the endpoint's tool set (nothing is called)."""
        await self._listing.refuse_outside(identity, tool, toolset)

    # --- invoke -------------------------------------------------------------------------

    async def invoke(self, identity: Identity, request: InvokeRequest,
                     body_bytes: int | None = None, *, turn_id: str | None = None) -> Outcome:
        """A call's outcome; a refusal before the call exists (bad name or arguments, another
        team, an idempotency conflict) is raised as its ApiError."""
        ctx_team = request.context.team_id
        if ctx_team is not None and ctx_team != identity.team_id:
            raise Denied("context.team_id does not match the token's team", reasons=["team_mismatch"])
        with tracing.span("validate"):
            manifest = self._prepared.resolve(request.tool)
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
            return await self._idempotent(call, request.idempotency_key, self.run)

    def bound(self, call: Call) -> Any:
        return log_context.bound(
            call_id=call.call_id,
            decision_id=call.decision_id,
            tool=call.manifest.tool_id,
            agent_id=call.identity.agent_id,
            team_id=call.identity.team_id,
        )

    async def run(self, call: Call) -> Outcome:
        """Decide the call, then end it here, hold it for an approval, or execute it."""
        decided = await self._decide(call)
        if decided.refusal is not None:
            return await self._records.end(call, decided.decision, decided.refusal,
                                           decided.record())
        if decided.hold:
            return await self._hold(decided)
        return await self._execute(decided)

    async def end_unexecuted(self, call: Call, ending: Ending) -> Outcome:
        """End a call that never reached its tool, outside the policy (e.g. a held call
        cancelled by its agent): recorded like any other ending."""
        # Not a policy decision: nothing goes to the decision log for it.
        decision = Decision(allow=True, decision_id=call.decision_id, engine=self._pdp.engine.name,
                            policy_revision=self._pdp.revision, reasons=["cancelled"])
        with self.bound(call):
            return await self._records.end(call, decision, ending, None)
