"""The decision log: one record per decision, its input redacted, written in batches."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import asyncpg

from pdp.decision import Decision
from wire.digest import args_digest

REDACTED = "[redacted]"


@dataclass(kw_only=True)
class DecisionRecord:
    decision_id: str
    time: datetime
    policy_revision: str
    engine: str
    team_id: str
    agent_id: str
    roles: list[str]
    tool: str
    phase: str
    result: str  # allow | deny | approval_required | error
    reasons: list[str]
    error_code: str | None
    latency_us: float
    call_id: str | None
    input: dict[str, Any] | None
    # What the policy answered, whole (records journaled before this field have none).
    output: dict[str, Any] | None = None


def redact_input(doc: dict[str, Any], redact: list[str], confidential: bool) -> dict[str, Any]:
    """The input as the log keeps it: in confidential mode (or when obligations redact "args")
    arguments become their hash and size; listed argument keys become "[redacted]"."""
    out = dict(doc)
    args = doc.get("args") or {}
    if confidential or "args" in redact or "*" in redact:
        digest, size = args_digest(args)
        out["args"] = {"sha256": digest, "size": size}
    elif redact:
        out["args"] = {k: (REDACTED if k in redact else v) for k, v in args.items()}
    return out


def output_of(decision: Decision) -> dict[str, Any]:
    """The decision as the policy gave it (or as the PDP failed closed), for the log."""
    return {
        "allow": decision.allow,
        "require_approval": decision.require_approval,
        "reasons": decision.reasons,
        "obligations": decision.obligations.model_dump(mode="json", exclude_none=True),
        "error_code": decision.error_code,
    }


def result_of(decision: Decision) -> str:
    if decision.error_code is not None:
        return "error"
    if not decision.allow:
        return "deny"
    return "approval_required" if decision.require_approval else "allow"


def decision_record(
    decision: Decision,
    doc: dict[str, Any] | None,
    *,
    team_id: str,
    agent_id: str,
    roles: list[str],
    tool: str,
    phase: str,
    latency_s: float,
    call_id: str | None,
    at: datetime | None = None,
) -> DecisionRecord:
    confidential = bool(doc and doc.get("context", {}).get("confidential"))
    return DecisionRecord(
        decision_id=decision.decision_id or str(uuid.uuid4()),
        time=at or datetime.now(timezone.utc),
        policy_revision=decision.policy_revision,
        engine=decision.engine,
        team_id=team_id,
        agent_id=agent_id,
        roles=roles,
        tool=tool,
        phase=phase,
        result=result_of(decision),
        reasons=decision.reasons,
        error_code=decision.error_code,
        latency_us=latency_s * 1e6,
        call_id=call_id,
        input=redact_input(doc, decision.obligations.redact, confidential) if doc else None,
        output=output_of(decision),
    )


def decisions_ctes(source: str) -> str:
    """The statement's part that inserts decision records (`source`: one per row as jsonb `x`,
    the journal's JSON form)."""
    return f"""
decisions_written AS (
    INSERT INTO decisions (decision_id, time, policy_revision, engine, team_id, agent_id, roles,
                           tool, phase, result, reasons, error_code, latency_us, call_id, input,
                           output)
    SELECT b.decision_id, b.time, b.policy_revision, b.engine, b.team_id, b.agent_id, b.roles,
           b.tool, b.phase, b.result, b.reasons, b.error_code, b.latency_us,
           NULLIF(b.call_id, '')::uuid, b.input, b.output
    FROM ({source}) AS src, LATERAL jsonb_to_record(src.x) AS b(
        decision_id uuid, time timestamptz, policy_revision text, engine text, team_id text,
        agent_id text, roles jsonb, tool text, phase text, result text, reasons jsonb,
        error_code text, latency_us float8, call_id text, input jsonb, output jsonb)
    ON CONFLICT (decision_id) DO NOTHING
    RETURNING 1
)"""


async def query_decisions(
    pool: asyncpg.Pool,
    *,
    team_id: str | None,
    agent_id: str | None = None,
    tool: str | None = None,
    result: str | None = None,
    phase: str | None = None,
    call_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        """SELECT * FROM decisions
           WHERE ($1::text IS NULL OR team_id = $1) AND ($2::text IS NULL OR agent_id = $2)
             AND ($3::text IS NULL OR tool = $3) AND ($4::text IS NULL OR result = $4)
             AND ($5::text IS NULL OR phase = $5) AND ($6::uuid IS NULL OR call_id = $6)
             AND ($7::timestamptz IS NULL OR time >= $7) AND ($8::timestamptz IS NULL OR time < $8)
           ORDER BY time DESC LIMIT $9""",
        team_id, agent_id, tool, result, phase, uuid.UUID(call_id) if call_id else None,
        since, until, limit,
    )
    out = []
    for r in rows:
        d = dict(r)
        d["decision_id"] = str(d["decision_id"])
        d["call_id"] = str(d["call_id"]) if d["call_id"] else None
        d["time"] = d["time"].isoformat()
        out.append(d)
    return out
