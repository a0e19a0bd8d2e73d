"""The decision log: one record per decision, its input redacted, written in batches."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import asyncpg
import orjson
from pydantic import BaseModel, ConfigDict

from pdp.decision import Decision
from pdp.digest import args_digest

REDACTED = "[redacted]"


class DecisionRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

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
) -> DecisionRecord:
    confidential = bool(doc and doc.get("context", {}).get("confidential"))
    return DecisionRecord(
        decision_id=decision.decision_id or str(uuid.uuid4()),
        time=datetime.now(timezone.utc),
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


_INSERT = """
INSERT INTO decisions (decision_id, time, policy_revision, engine, team_id, agent_id, roles, tool,
                       phase, result, reasons, error_code, latency_us, call_id, input, output)
SELECT d, t, rev, eng, team, agent, roles::jsonb, tool, phase, res, reasons::jsonb, code, lat,
       call, inp::jsonb, outp::jsonb
FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
            $13::float8[], $14::uuid[], $15::text[], $16::text[])
     AS b(d, t, rev, eng, team, agent, roles, tool, phase, res, reasons, code, lat, call, inp,
          outp)
ON CONFLICT (decision_id) DO NOTHING
"""


async def write_decisions(conn: asyncpg.Connection | asyncpg.Pool, records: list[DecisionRecord]) -> None:
    if not records:
        return
    cols: list[list[Any]] = [[] for _ in range(16)]
    for r in records:
        # JSON columns travel as text (asyncpg would read nested lists as array dimensions);
        # ids too (asyncpg parses a UUID string itself, far cheaper than uuid.UUID()).
        values = (
            r.decision_id, r.time, r.policy_revision, r.engine, r.team_id, r.agent_id,
            orjson.dumps(r.roles).decode(), r.tool, r.phase, r.result,
            orjson.dumps(r.reasons).decode(), r.error_code, r.latency_us,
            r.call_id or None,
            orjson.dumps(r.input).decode() if r.input is not None else None,
            orjson.dumps(r.output).decode() if r.output is not None else None,
        )
        for col, v in zip(cols, values):
            col.append(v)
    await conn.execute(_INSERT, *cols)


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
