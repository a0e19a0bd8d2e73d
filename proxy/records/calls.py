"""Calls as durable objects: the record the journal writes at start and at the end of a call,
and the read model of GET /v1/calls/{call_id}."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import TypeAdapter

from infra.ids import dashed

TERMINAL = ("COMPLETED", "FAILED", "DENIED", "UNAVAILABLE", "CANCELLED")


@dataclass(kw_only=True)
class CallRecord:
    """A call's row. `status == "RUNNING"` at start; a terminal status at the end. Unknown
    fields stay None and never overwrite what an earlier record set."""

    call_id: str
    team_id: str
    agent_id: str
    agent_run_id: str | None
    tool: str
    status: str
    owner: str | None = None
    args_hash: str | None = None
    args_size: int | None = None
    confidential: bool = False
    idempotency_key: str | None = None
    decision_id: str | None = None
    result_id: str | None = None
    http_status: int | None = None
    response: dict[str, Any] | None = None
    diagnostic: str | None = None
    refs: dict[str, Any] | None = None
    created_at: datetime
    started_at: datetime | None = None
    deadline_at: datetime | None = None
    finished_at: datetime | None = None
    latency_ms: float | None = None
    turn_id: str | None = None


def calls_ctes(source: str) -> str:
    """The statement's part that upserts call records (`source`: one per row as jsonb `x`, no
    call twice: see fold); a call that already reached a terminal status is never changed
    again (so a late start record, or a second ending, cannot undo the first ending)."""
    return f"""
calls_written AS (
    INSERT INTO calls AS c (call_id, team_id, agent_id, agent_run_id, tool, status, owner,
                            args_hash, args_size, confidential, idempotency_key, decision_id,
                            result_id, http_status, response, diagnostic, refs, created_at,
                            started_at, deadline_at, finished_at, latency_ms, turn_id)
    SELECT b.call_id, b.team_id, b.agent_id, b.agent_run_id, b.tool, b.status, b.owner,
           b.args_hash, b.args_size, b.confidential, b.idempotency_key,
           NULLIF(b.decision_id, '')::uuid, NULLIF(b.result_id, '')::uuid, b.http_status,
           b.response, b.diagnostic, b.refs, b.created_at, b.started_at, b.deadline_at,
           b.finished_at, b.latency_ms, NULLIF(b.turn_id, '')::uuid
    FROM ({source}) AS src, LATERAL jsonb_to_record(src.x) AS b(
        call_id uuid, team_id text, agent_id text, agent_run_id text, tool text, status text,
        owner text, args_hash text, args_size int, confidential bool, idempotency_key text,
        decision_id text, result_id text, http_status int, response jsonb, diagnostic text,
        refs jsonb, created_at timestamptz, started_at timestamptz, deadline_at timestamptz,
        finished_at timestamptz, latency_ms float8, turn_id text)
    ON CONFLICT (call_id) DO UPDATE SET
        status       = CASE WHEN c.status IN ('COMPLETED', 'FAILED', 'DENIED', 'UNAVAILABLE',
                                              'CANCELLED')
                            THEN c.status ELSE EXCLUDED.status END,
        owner        = coalesce(EXCLUDED.owner, c.owner),
        decision_id  = coalesce(EXCLUDED.decision_id, c.decision_id),
        result_id    = coalesce(c.result_id, EXCLUDED.result_id),
        http_status  = coalesce(EXCLUDED.http_status, c.http_status),
        response     = coalesce(EXCLUDED.response, c.response),
        diagnostic   = coalesce(EXCLUDED.diagnostic, c.diagnostic),
        refs         = coalesce(EXCLUDED.refs, c.refs),
        started_at   = coalesce(c.started_at, EXCLUDED.started_at),
        deadline_at  = coalesce(EXCLUDED.deadline_at, c.deadline_at),
        finished_at  = coalesce(EXCLUDED.finished_at, c.finished_at),
        latency_ms   = coalesce(EXCLUDED.latency_ms, c.latency_ms),
        turn_id      = coalesce(c.turn_id, EXCLUDED.turn_id)
    WHERE c.status NOT IN ('COMPLETED', 'FAILED', 'DENIED', 'UNAVAILABLE', 'CANCELLED')
    RETURNING 1
)"""


# Fields an update keeps from the earlier record when it has one (the rest: the later wins).
_FIRST_WINS = ("result_id", "started_at", "turn_id")
_MERGED = ("owner", "decision_id", "result_id", "http_status", "response", "diagnostic", "refs",
           "started_at", "deadline_at", "finished_at", "latency_ms", "turn_id")


def fold(records: list[CallRecord]) -> list[CallRecord]:
    """One record per call, merged exactly as the upsert merges a later record into a row: a
    terminal record is final; otherwise non-empty fields of the later record win (but the first
    result_id and started_at stay). Postgres refuses an upsert touching a row twice."""
    merged: dict[str, CallRecord] = {}
    for r in records:
        old = merged.get(r.call_id)
        if old is None:
            merged[r.call_id] = r
        elif old.status not in TERMINAL:
            update: dict[str, Any] = {"status": r.status}
            for name in _MERGED:
                new, before = getattr(r, name), getattr(old, name)
                keep_old = before is not None and (new is None or name in _FIRST_WINS)
                update[name] = before if keep_old else new
            merged[r.call_id] = dataclasses.replace(old, **update)
    return list(merged.values())


_CALL: TypeAdapter[CallRecord] = TypeAdapter(CallRecord)


def fold_docs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Call records in their JSON form, one per call (see fold)."""
    if len({r["call_id"] for r in rows}) == len(rows):
        return rows
    return [_CALL.dump_python(r, mode="json") for r in fold([_CALL.validate_python(r) for r in rows])]


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v else None


def result_id_for(call_id: str) -> str:
    """A call's result id: derived from its call id by a fixed mask that keeps the UUID's
    version and variant, so a result is found from its id alone (GET /v1/results/{id}), in
    Postgres or still in the journal. Different from the call id, one per call."""
    return _masked(call_id)


def call_id_of(result_id: str) -> str:
    return _masked(result_id)


def _masked(id_: str) -> str:
    digits = id_.replace("-", "")
    if len(digits) == 32 and digits.isascii():  # the canonical form, without a uuid.UUID
        with contextlib.suppress(ValueError):
            return dashed(f"{int(digits, 16) ^ _RESULT_MASK:032x}")
    return str(uuid.UUID(int=uuid.UUID(id_).int ^ _RESULT_MASK))  # any other form, or ValueError


_RESULT_MASK = int("a5a5a5a5a5a50a5a1a5aa5a5a5a5a5a5", 16)  # zero on the version and variant bits


def call_view(r: Any) -> dict[str, Any]:
    """The call as GET /v1/calls/{id} shows it, from a row or a record (same field names)."""
    response = r["response"] or {}
    refs = r["refs"] or {}
    return {
        "call_id": str(r["call_id"]),
        "status": r["status"],
        "tool": r["tool"],
        "team_id": r["team_id"],
        "agent_id": r["agent_id"],
        "agent_run_id": r["agent_run_id"],
        "turn_id": str(r["turn_id"]) if r["turn_id"] else None,
        "decision_id": str(r["decision_id"]) if r["decision_id"] else None,
        "result_id": str(r["result_id"]) if r["result_id"] else None,
        "http_status": r["http_status"],
        "created_at": _iso(r["created_at"]),
        "started_at": _iso(r["started_at"]),
        "finished_at": _iso(r["finished_at"]),
        "latency_ms": r["latency_ms"],
        "output": response.get("output"),
        "error": response.get("error"),
        "tokens_used": response.get("tokens_used", 0),
        "cost_1t": response.get("cost_1t", 0),
        "object_refs": refs.get("object_refs", []),
        "artifacts": refs.get("artifacts", []),
        "observations": refs.get("observations", []),
        "provenance_refs": refs.get("provenance_refs", []),
        "diagnostic": r["diagnostic"],
        "approval_id": response.get("approval_id"),
    }


def result_view(call: dict[str, Any]) -> dict[str, Any]:
    keys = ("result_id", "call_id", "tool", "status", "output", "error", "tokens_used", "cost_1t",
            "object_refs", "artifacts", "observations", "provenance_refs", "finished_at")
    return {k: call[k] for k in keys}


async def read_call(pool: asyncpg.Pool, call_id: str, team_id: str) -> dict[str, Any] | None:
    """The call as GET /v1/calls/{id} shows it; None for another team's call (a 404, never a
    403: other teams' calls do not exist for the caller)."""
    try:
        cid = uuid.UUID(call_id)
    except ValueError:
        return None
    r = await pool.fetchrow("SELECT * FROM calls WHERE call_id = $1 AND team_id = $2", cid, team_id)
    return call_view(r) if r is not None else None


async def read_ending(pool: asyncpg.Pool, call_id: str) -> tuple[int | None, dict[str, Any] | None] | None:
    """A call's row as far as it goes: (HTTP status, response) once it ended, (None, None)
    while it runs; None when Postgres has no row for it."""
    row = await pool.fetchrow("SELECT http_status, response FROM calls WHERE call_id = $1",
                              uuid.UUID(call_id))
    return None if row is None else (row["http_status"], row["response"])


async def read_response(pool: asyncpg.Pool, call_id: str) -> tuple[int, dict[str, Any]] | None:
    """The response a call's row keeps once it ended (its HTTP status and body), if it has one."""
    ending = await read_ending(pool, call_id)
    if ending is None or ending[1] is None:
        return None
    return ending[0], ending[1]  # type: ignore[return-value]  # an ended row has both
