"""Approvals: a call that needs a governance decision is stored, decided, then resumed once.

States: pending -> approved | denied | expired; approved -> executing -> executed.
Every transition is one conditional UPDATE, so two replicas (or two clicks) cannot both win.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg

# A trigger NOTIFYs it at commit with the team of every approval that changed (migration 0101).
CHANNEL = "toolproxy_approvals"

_COLUMNS = """a.approval_id, a.call_id, a.team_id, a.agent_id, a.tool, a.args_hash, a.state,
              a.reasons, a.policy_revision, a.requested_at, a.expires_at, a.decided_by,
              a.decided_at, a.decision_reason, a.preview, a.binding"""


@dataclass(frozen=True, slots=True)
class Approval:
    approval_id: str
    call_id: str
    team_id: str
    agent_id: str
    tool: str
    args_hash: str
    state: str
    reasons: list[str]
    policy_revision: str
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    decision_reason: str | None
    preview: dict[str, Any] | None = None  # what will run, as its service prepared it
    binding: str | None = None  # the preview's hash: the only thing the approval covers

    def as_json(self) -> dict[str, Any]:
        return {
            "approval_id": self.approval_id,
            "call_id": self.call_id,
            "team_id": self.team_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "args_hash": self.args_hash,
            "state": self.state,
            "reasons": self.reasons,
            "policy_revision": self.policy_revision,
            "requested_at": self.requested_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "decided_by": self.decided_by,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "decision_reason": self.decision_reason,
            "preview": self.preview,
            "binding": self.binding,
        }


@dataclass(frozen=True, slots=True)
class StoredCall:
    call_id: str
    team_id: str
    agent_id: str
    agent_run_id: str | None
    tool: str
    args: dict[str, Any] | None
    args_hash: str
    confidential: bool
    status: str
    http_status: int | None
    response: dict[str, Any] | None
    turn_id: str | None = None


def _approval(r: asyncpg.Record) -> Approval:
    return Approval(
        approval_id=str(r["approval_id"]),
        call_id=str(r["call_id"]),
        team_id=r["team_id"],
        agent_id=r["agent_id"],
        tool=r["tool"],
        args_hash=r["args_hash"],
        state=r["state"],
        reasons=list(r["reasons"]),
        policy_revision=r["policy_revision"],
        requested_at=r["requested_at"],
        expires_at=r["expires_at"],
        decided_by=r["decided_by"],
        decided_at=r["decided_at"],
        decision_reason=r["decision_reason"],
        preview=r["preview"],
        binding=r["binding"],
    )


def _call(r: asyncpg.Record) -> StoredCall:
    return StoredCall(
        call_id=str(r["call_id"]),
        team_id=r["team_id"],
        agent_id=r["agent_id"],
        agent_run_id=r["agent_run_id"],
        tool=r["tool"],
        args=r["args"],
        args_hash=r["args_hash"],
        confidential=r["confidential"],
        status=r["status"],
        http_status=r["http_status"],
        response=r["response"],
        turn_id=str(r["turn_id"]) if r["turn_id"] else None,
    )


class ApprovalError(Exception):
    """A transition that is not allowed from the current state (the message says why)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ApprovalRepository:
    def __init__(self, pool: asyncpg.Pool, *, ttl: timedelta = timedelta(minutes=15)) -> None:
        self._pool = pool
        self.ttl = ttl

    async def request(
        self,
        *,
        call_id: str,
        decision_id: str,
        team_id: str,
        agent_id: str,
        agent_run_id: str | None,
        tool: str,
        args: dict[str, Any] | None,
        args_hash: str,
        args_size: int,
        confidential: bool,
        reasons: list[str],
        policy_revision: str,
        preview: dict[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> Approval:
        """Store the call (arguments unless confidential) and its pending approval, atomically."""
        approval_id = uuid.uuid4()
        expires = datetime.now(timezone.utc) + self.ttl
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                """INSERT INTO calls (call_id, team_id, agent_id, agent_run_id, tool, args,
                                      args_hash, args_size, confidential, status, decision_id,
                                      turn_id)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'AUTHORIZATION_REQUIRED', $10, $11)""",
                uuid.UUID(call_id), team_id, agent_id, agent_run_id, tool,
                None if confidential else args, args_hash, args_size, confidential,
                uuid.UUID(decision_id), uuid.UUID(turn_id) if turn_id else None,
            )
            row = await conn.fetchrow(
                f"""INSERT INTO approvals AS a (approval_id, call_id, team_id, agent_id, tool,
                                                args_hash, state, reasons, policy_revision,
                                                expires_at, preview, binding)
                    VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, $10, $11)
                    RETURNING {_COLUMNS}""",
                approval_id, uuid.UUID(call_id), team_id, agent_id, tool, args_hash, reasons,
                policy_revision, expires, preview, preview["hash"] if preview else None,
            )
        return _approval(row)

    async def get(self, approval_id: str) -> Approval | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM approvals a WHERE a.approval_id = $1", _uuid(approval_id)
        )
        return _approval(row) if row else None

    async def for_call(self, call_id: str) -> tuple[Approval, StoredCall] | None:
        row = await self._pool.fetchrow(
            f"""SELECT {_COLUMNS}, c.agent_run_id, c.args, c.confidential, c.status,
                       c.http_status, c.response, c.turn_id
                FROM approvals a JOIN calls c USING (call_id) WHERE a.call_id = $1""",
            _uuid(call_id),
        )
        if row is None:
            return None
        return _approval(row), _call(row)

    async def list(self, *, team_id: str | None, state: str | None, limit: int = 100) -> list[Approval]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM approvals a
                WHERE ($1::text IS NULL OR a.team_id = $1) AND ($2::text IS NULL OR a.state = $2)
                ORDER BY a.requested_at DESC LIMIT $3""",
            team_id, state, limit,
        )
        return [_approval(r) for r in rows]

    async def decide(self, approval_id: str, *, approve: bool, by: str, reason: str) -> Approval:
        """pending -> approved | denied. A decided, expired or executed approval stays as it is."""
        row = await self._pool.fetchrow(
            f"""UPDATE approvals a SET state = $2, decided_by = $3, decided_at = now(),
                                       decision_reason = $4
                WHERE a.approval_id = $1 AND a.state = 'pending' AND a.expires_at > now()
                RETURNING {_COLUMNS}""",
            _uuid(approval_id), "approved" if approve else "denied", by, reason,
        )
        if row is not None:
            return _approval(row)
        current = await self.get(approval_id)
        if current is None:
            raise ApprovalError("not_found", "no such approval")
        state = "expired" if current.state == "pending" else current.state
        raise ApprovalError("approval_not_pending", f"the approval is already {state}")

    async def claim(self, call_id: str) -> bool:
        """approved -> executing, for exactly one caller."""
        row = await self._pool.fetchval(
            """UPDATE approvals SET state = 'executing'
               WHERE call_id = $1 AND state = 'approved' AND expires_at > now()
               RETURNING approval_id""",
            _uuid(call_id),
        )
        return row is not None

    async def unclaim(self, call_id: str) -> None:
        """executing -> approved again: the claimed run was refused before anything ran."""
        await self._pool.execute(
            "UPDATE approvals SET state = 'approved' WHERE call_id = $1 AND state = 'executing'",
            _uuid(call_id))

    async def complete(self, call_id: str, *, status: str, http_status: int,
                       response: dict[str, Any], decision_id: str) -> None:
        """executing -> executed, with the response kept for every later resume."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                """UPDATE calls SET status = $2, http_status = $3, response = $4,
                                    decision_id = $5, finished_at = now()
                   WHERE call_id = $1""",
                _uuid(call_id), status, http_status, response, uuid.UUID(decision_id),
            )
            await conn.execute(
                "UPDATE approvals SET state = 'executed', finalized = true WHERE call_id = $1",
                _uuid(call_id),
            )

    async def expire_due(self) -> list[str]:
        """pending or approved past their deadline -> expired. Returns the calls expired now."""
        rows = await self._pool.fetch(
            """UPDATE approvals SET state = 'expired'
               WHERE state IN ('pending', 'approved') AND expires_at <= now()
               RETURNING call_id"""
        )
        return [str(r["call_id"]) for r in rows]

    async def cancel(self, call_id: str) -> bool:
        """pending | approved -> cancelled, for exactly one caller (it records the ending)."""
        row = await self._pool.fetchval(
            """UPDATE approvals SET state = 'cancelled', finalized = true
               WHERE call_id = $1 AND state IN ('pending', 'approved') RETURNING approval_id""",
            _uuid(call_id),
        )
        return row is not None

    async def claim_refused(self, call_id: str) -> str | None:
        """For a denied or expired call, whoever gets here first records its ending: returns
        the state ('denied' | 'expired') to that one caller, None to everyone else."""
        return await self._pool.fetchval(
            """UPDATE approvals SET finalized = true
               WHERE call_id = $1 AND state IN ('denied', 'expired') AND NOT finalized
               RETURNING state""",
            _uuid(call_id),
        )

    async def store_ending(self, call_id: str, *, status: str, http_status: int,
                           response: dict[str, Any], decision_id: str) -> None:
        await self._pool.execute(
            """UPDATE calls SET status = $2, http_status = $3, response = $4, decision_id = $5,
                                finished_at = now()
               WHERE call_id = $1""",
            _uuid(call_id), status, http_status, response, uuid.UUID(decision_id),
        )


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError):
        raise ApprovalError("not_found", "no such approval or call") from None
