"""How a forwarded call ended: from its tool's reply (metered, checked against the output
schema, shaped, its domain events taken), or from the reason there was no reply to use."""

from __future__ import annotations

import asyncpg
import orjson
import structlog

from proxy.config import Settings
from proxy.core.call import Call, Ending
from proxy.core.catalog import Catalog
from proxy.core.errors import CallTooLargeForBus, ToolTimeout, ToolUnavailable
from proxy.core.output import schema_problem, shape_output
from proxy.core.pipeline.prepared import Prepared
from proxy.errors import DependencyUnavailable
from proxy.records.events import tool_events
from wire.call_context import REFUSED_CODES
from wire.protocol import (
    BUSY,
    PLUGIN_ERROR_CODES,
    TOOL_CHANGED,
    UPSTREAM_ERROR_CODES,
    UPSTREAM_UNAVAILABLE,
    ToolReply,
)

log = structlog.get_logger("toolproxy.pipeline")


class Endings:
    def __init__(self, *, settings: Settings, pool: asyncpg.Pool, catalog: Catalog,
                 prepared: Prepared) -> None:
        self._settings = settings
        self._pool = pool  # large outputs are kept aside as artifacts
        self._catalog = catalog
        self._prepared = prepared

    def no_reply(self, call: Call, exc: Exception) -> Ending:
        """The ending of a call whose tool gave no reply to use."""
        if isinstance(exc, ToolTimeout):
            return Ending("FAILED", exc.code, exc.message, executed=True)
        if isinstance(exc, ToolUnavailable):
            self._catalog.mark_unreachable(call.manifest.tool_id)
            return Ending("UNAVAILABLE", exc.code, exc.message)
        if isinstance(exc, DependencyUnavailable):
            return Ending("UNAVAILABLE", exc.code, exc.message)
        if isinstance(exc, CallTooLargeForBus):  # refused at the publish: nothing ran
            return Ending("FAILED", exc.code, exc.message)
        return Ending("FAILED", "bad_tool_output", str(exc), executed=True)

    def busy(self, reply: ToolReply, tool_id: str = "") -> Ending | None:
        """The service refused before running it: this team's share of it is in use; or it
        did not accept this proxy's signed call context (its public keys are not this proxy's
        key: a deployment fault, docs/operators/bus.md); or (an upstream tool) its definition is
        not the pinned one, or its upstream cannot be reached. Nothing ran."""
        if reply.ok or reply.error is None:
            return None
        if reply.error.code == BUSY:
            return Ending("UNAVAILABLE", "tool_busy", reply.error.message, retry_after=1.0)
        if reply.error.code in REFUSED_CODES:
            log.error("call_context_refused_by_service", code=reply.error.code,
                      message=reply.error.message)
            return Ending("UNAVAILABLE", "tool_unavailable", "the service refused this proxy's "
                          f"signed call context ({reply.error.code}); nothing ran")
        if reply.error.code == TOOL_CHANGED:
            self._catalog.mark_unreachable(tool_id)
            return Ending("UNAVAILABLE", TOOL_CHANGED, reply.error.message)
        if reply.error.code == UPSTREAM_UNAVAILABLE:  # not reached: its breaker is open, or no link
            return Ending("UNAVAILABLE", UPSTREAM_UNAVAILABLE, reply.error.message, retry_after=1.0)
        return None

    @staticmethod
    def cost(call: Call, reply: ToolReply) -> float:
        return round(call.manifest.cost.price(reply.tokens_used, reply.compute_units), 12)

    async def from_reply(self, call: Call, reply: ToolReply, notes: list[str],
                         cost: float) -> Ending:
        m = call.manifest
        refs = {"object_refs": reply.object_refs, "artifacts": list(reply.artifacts),
                "observations": reply.observations, "provenance_refs": reply.provenance_refs}
        # Set while the tool ran (its reply comes only after the forward's Meanwhile is done).
        assert call.result_id is not None
        e = Ending("FAILED", executed=True, result_id=call.result_id, tokens=reply.tokens_used,
                   compute=reply.compute_units, cost=cost, diagnostics=list(notes), refs=refs)
        if not reply.ok:
            assert reply.error is not None
            if reply.error.code == "timeout":
                e.code, e.message = "timeout", reply.error.message
            elif reply.error.code in UPSTREAM_ERROR_CODES and m.from_upstream:
                # An upstream's failure is reported as such (services/upstreams' stable codes).
                e.code, e.message = reply.error.code, reply.error.message
            elif m.plugin and reply.error.code in PLUGIN_ERROR_CODES:
                # A plugin's own ending is reported as such (the sandbox's stable codes).
                e.code, e.message = reply.error.code, reply.error.message
            else:
                e.code, e.message, e.tool_code = "tool_error", reply.error.message, reply.error.code
            return e
        problem = schema_problem(self._prepared.of(m).output, reply.output)
        if problem is not None:
            e.code, e.message = "bad_tool_output", problem
            return e
        limit = self._settings.max_output_bytes
        if call.confidential:
            # Confidential outputs are never stored: no artifact; too large is an error.
            size = len(orjson.dumps(reply.output))
            if size > limit:
                e.code = "output_too_large"
                e.message = (f"a confidential call's output of {size} bytes exceeds the "
                             f"{limit}-byte bound and cannot be kept aside")
                return e
        shaped = await shape_output(self._pool, reply.output, team_id=call.identity.team_id,
                                    call_id=call.call_id, max_inline_bytes=limit)
        e.status, e.code, e.output = "COMPLETED", None, shaped.output
        e.diagnostics.extend(shaped.diagnostics)
        # Domain events the tool reported (template.updated...): written with the call's own
        # events, in the same journal entry, only because it completed.
        events, more = tool_events(call.identity.team_id, m.tool_id, reply.observations,
                                   run_id=call.agent_run_id, call_id=call.call_id,
                                   confidential=call.confidential)
        call.events.extend(events)
        e.diagnostics.extend(more)
        if shaped.artifact is not None:
            e.refs["artifacts"] = [shaped.artifact, *e.refs["artifacts"]]
        return e
