"""What a call leaves behind when it ends: its usage record, its row, its terminal event, and
the response as it may be stored (a confidential output only as its hash and size)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pdp.decision import Decision
from wire.digest import args_digest
from proxy.core.call import Call, Ending
from proxy.records.calls import CallRecord
from proxy.records.events import EventRecord, event
from proxy.records.usage import UsageRecord


def kept_body(body: dict[str, Any], confidential: bool) -> dict[str, Any]:
    """The response as it may be stored (call row, idempotency replay): a confidential call's
    output is kept only as its hash and size."""
    if not confidential or body.get("output") is None:
        return body
    digest, size = args_digest(body["output"])
    return {**body, "output": None, "output_sha256": digest, "output_size": size,
            "diagnostic": "confidential: the output is not retained"}


def terminal_event(call: Call, e: Ending, http_status: int, elapsed_s: float) -> EventRecord:
    """agent.tool.completed when the tool ran to an answer (or was cancelled), else agent.error."""
    ran = e.status in ("COMPLETED", "FAILED", "CANCELLED") and e.code != "timeout"
    payload: dict[str, Any] = {"tool": call.manifest.tool_id, "status": e.status, "code": e.code,
                               "http_status": http_status, "latency_ms": round(elapsed_s * 1000, 3)}
    if e.reasons:
        payload["reasons"] = e.reasons
    if e.status == "COMPLETED" and not call.confidential:
        payload["output"] = e.output
    refs = {"result_id": e.result_id, **{k: v for k, v in e.refs.items() if v}}
    return event(call.identity.team_id, "agent.tool.completed" if ran else "agent.error",
                 run_id=call.agent_run_id, call_id=call.call_id, refs=refs, payload=payload,
                 turn_id=call.turn_id)


def usage_record(call: Call, decision: Decision, e: Ending, http_status: int, elapsed_s: float,
                 finished: datetime) -> UsageRecord:
    m = call.manifest
    return UsageRecord(
        call_id=call.call_id, result_id=e.result_id, decision_id=call.decision_id,
        team_id=call.identity.team_id, agent_id=call.identity.agent_id,
        agent_run_id=call.agent_run_id, tool=m.tool_id, category=m.category, action=m.action,
        decision="allow" if decision.allow else "deny", status=e.status, error_code=e.code,
        http_status=http_status, latency_ms=elapsed_s * 1000.0, tokens_used=e.tokens,
        compute_units=e.compute, cost_1t=e.cost, started_at=call.started_at, finished_at=finished,
    )


def call_record(call: Call, e: Ending, body: dict[str, Any], http_status: int, *, owner: str,
                elapsed_s: float, finished: datetime) -> CallRecord:
    digest, size = call.args_digest or args_digest(call.args)
    return CallRecord(
        call_id=call.call_id, team_id=call.identity.team_id, agent_id=call.identity.agent_id,
        agent_run_id=call.agent_run_id, tool=call.manifest.tool_id, status=e.status, owner=owner,
        args_hash=digest, args_size=size, confidential=call.confidential,
        idempotency_key=call.idempotency_key, decision_id=call.decision_id,
        result_id=e.result_id, http_status=http_status,
        response=kept_body(body, call.confidential), diagnostic=body.get("diagnostic"),
        refs={k: v for k, v in e.refs.items() if v} or None, created_at=call.started_at,
        started_at=call.forwarded_at, finished_at=finished, latency_ms=elapsed_s * 1000.0,
        turn_id=call.turn_id,
    )
