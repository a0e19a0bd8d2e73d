"""Per-agent overrides in Postgres: allow or deny one exact tool, optionally tighter limits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

COLUMNS = (
    "override_id, team_id, agent_id, tool, effect, timeout_ms, rate_per_minute, reason, "
    "created_by, created_at, expires_at"
)


@dataclass(frozen=True, slots=True)
class Override:
    override_id: str
    team_id: str
    agent_id: str
    tool: str
    effect: str  # allow | deny
    timeout_ms: int | None
    rate_per_minute: int | None
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None

    def active(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at.timestamp() > now

    def policy_view(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "effect": self.effect,
            "timeout_ms": self.timeout_ms,
            "rate_per_minute": self.rate_per_minute,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "override_id": self.override_id,
            "team_id": self.team_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "effect": self.effect,
            "timeout_ms": self.timeout_ms,
            "rate_per_minute": self.rate_per_minute,
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def override_from_row(r: asyncpg.Record) -> Override:
    return Override(
        override_id=str(r["override_id"]),
        team_id=r["team_id"],
        agent_id=r["agent_id"],
        tool=r["tool"],
        effect=r["effect"],
        timeout_ms=r["timeout_ms"],
        rate_per_minute=r["rate_per_minute"],
        reason=r["reason"],
        created_by=r["created_by"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
    )


class OverrideRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def put(
        self,
        *,
        team_id: str,
        agent_id: str,
        tool: str,
        effect: str,
        timeout_ms: int | None,
        rate_per_minute: int | None,
        reason: str,
        created_by: str,
        expires_at: datetime | None,
    ) -> Override:
        row = await self._pool.fetchrow(
            f"""INSERT INTO overrides (override_id, team_id, agent_id, tool, effect, timeout_ms,
                                       rate_per_minute, reason, created_by, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT ON CONSTRAINT overrides_unique DO UPDATE SET
                    effect = EXCLUDED.effect, timeout_ms = EXCLUDED.timeout_ms,
                    rate_per_minute = EXCLUDED.rate_per_minute, reason = EXCLUDED.reason,
                    created_by = EXCLUDED.created_by, created_at = now(),
                    expires_at = EXCLUDED.expires_at
                RETURNING {COLUMNS}""",
            uuid.uuid4(), team_id, agent_id, tool, effect, timeout_ms, rate_per_minute, reason,
            created_by, expires_at,
        )
        return override_from_row(row)

    async def list(self, team_id: str | None) -> list[Override]:
        rows = await self._pool.fetch(
            f"""SELECT {COLUMNS} FROM overrides WHERE ($1::text IS NULL OR team_id = $1)
                ORDER BY created_at""",
            team_id,
        )
        return [override_from_row(r) for r in rows]

    async def delete(self, *, team_id: str, agent_id: str, tool: str) -> Override | None:
        row = await self._pool.fetchrow(
            f"""DELETE FROM overrides WHERE team_id = $1 AND agent_id = $2 AND tool = $3
                RETURNING {COLUMNS}""",
            team_id, agent_id, tool,
        )
        return override_from_row(row) if row else None
