"""The list phase: the catalog through the policy, so a tool the caller may not call is absent;
and the refusal of a call outside the tool set an endpoint serves, logged like a denial."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from pdp.decision import Decision
from pdp.decision_log import DecisionRecord, decision_record
from pdp.point import PolicyDecisionPoint
from proxy.core.catalog import Catalog
from proxy.core.errors import PdpUnavailable
from proxy.core.pipeline.prepared import Prepared
from proxy.identity.identity import Identity
from proxy.metrics import Metrics
from proxy.records.journal import Journal
from wire.manifest import ToolManifest


class Listing:
    def __init__(self, *, catalog: Catalog, pdp: PolicyDecisionPoint, prepared: Prepared,
                 journal: Journal, metrics: Metrics) -> None:
        self._catalog = catalog
        self._pdp = pdp
        self._prepared = prepared
        self._journal = journal
        self._metrics = metrics

    async def callable_tools(self, identity: Identity,
                             only: Collection[str] | None = None) -> list[ToolManifest]:
        """Every decision is logged; any PDP failure fails the whole listing (closed). `only`:
        the tools an endpoint serves (a tool set); no other is asked about."""
        if not self._pdp.ready:
            raise PdpUnavailable("the policy decision point is not ready")
        allowed: list[ToolManifest] = []
        records: list[DecisionRecord] = []
        manifests = self._catalog.manifests()
        if only is not None:
            manifests = [m for m in manifests if m.tool_id in only]
        try:
            for m in manifests:
                decision, seconds, doc = await self._pdp.decide(
                    decision_id=str(uuid.uuid4()), agent_id=identity.agent_id,
                    team_id=identity.team_id, roles=identity.roles, scopes=identity.scopes,
                    tool=self._prepared.of(m).view,
                    args=None, context={"team_id": identity.team_id}, phase="list",
                )
                self._metrics.pdp_duration.labels(engine=decision.engine, phase="list").observe(seconds)
                records.append(decision_record(
                    decision, doc, team_id=identity.team_id, agent_id=identity.agent_id,
                    roles=identity.roles, tool=m.tool_id, phase="list", latency_s=seconds,
                    call_id=None))
                if decision.error_code is not None:
                    self._metrics.pdp_errors.labels(code=decision.error_code).inc()
                    raise PdpUnavailable("the policy decision point could not decide")
                if decision.allow:
                    allowed.append(m)
        finally:
            if records:
                await self._journal.record(decisions=records)  # durable even if cancelled
        return allowed

    async def refuse_outside(self, identity: Identity, tool: str, toolset: str) -> None:
        """A call of a tool the endpoint's set does not hold: nothing runs, and the decision
        log keeps a denial (engine `toolset`: the set refused it before any policy)."""
        pdp = self._pdp
        decision = Decision(allow=False, reasons=["not_in_toolset"], decision_id=str(uuid.uuid4()),
                            engine="toolset", policy_revision=pdp.revision)
        doc = {"subject": {"agent_id": identity.agent_id, "team_id": identity.team_id,
                           "roles": identity.roles},
               "action": f"tool.{tool}.invoke", "phase": "call", "context": {"toolset": toolset}}
        record = decision_record(decision, doc, team_id=identity.team_id,
                                 agent_id=identity.agent_id, roles=identity.roles, tool=tool,
                                 phase="call", latency_s=0.0, call_id=None)
        await self._journal.record(decisions=[record])
