"""Team rules in Postgres: a team's own governance tightens its team's decisions per tool.

A rule can deny a tool to the whole team, require a governance approval for each call, cap
the rate or shorten the deadline. Rules never allow anything and never leave their team:
they reach the policy as `input.team_rules`, built from the calling subject's team only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

COLUMNS = ("team_id, tool, deny, require_approval, timeout_ms, rate_per_minute, reason, "
           "created_by, created_at, expires_at")


@dataclass(frozen=True, slots=True)
class TeamRule:
    team_id: str
    tool: str
    deny: bool
    require_approval: bool
    timeout_ms: int | None
    rate_per_minute: int | None
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None

    def active(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at.timestamp() > now

    def policy_view(self) -> dict[str, Any]:
        return {"tool": self.tool, "deny": self.deny, "require_approval": self.require_approval,
                "timeout_ms": self.timeout_ms, "rate_per_minute": self.rate_per_minute}

    def as_json(self) -> dict[str, Any]:
        return {
            **self.policy_view(),
            "team_id": self.team_id,
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def team_rule_from_row(r: asyncpg.Record) -> TeamRule:
    return TeamRule(
        team_id=r["team_id"], tool=r["tool"], deny=r["deny"], require_approval=r["require_approval"],
        timeout_ms=r["timeout_ms"], rate_per_minute=r["rate_per_minute"], reason=r["reason"],
        created_by=r["created_by"], created_at=r["created_at"], expires_at=r["expires_at"],
    )


class TeamRuleRepository:
    """Writes fire the grants channel's NOTIFY: every replica reloads that team within a second."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def put(self, *, team_id: str, tool: str, deny: bool, require_approval: bool,
                  timeout_ms: int | None, rate_per_minute: int | None, reason: str,
                  created_by: str, expires_at: datetime | None) -> TeamRule:
        row = await self._pool.fetchrow(
            f"""INSERT INTO team_rules (team_id, tool, deny, require_approval, timeout_ms,
                                        rate_per_minute, reason, created_by, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (team_id, tool) DO UPDATE SET
                    deny = EXCLUDED.deny, require_approval = EXCLUDED.require_approval,
                    timeout_ms = EXCLUDED.timeout_ms, rate_per_minute = EXCLUDED.rate_per_minute,
                    reason = EXCLUDED.reason, created_by = EXCLUDED.created_by,
                    created_at = now(), expires_at = EXCLUDED.expires_at
                RETURNING {COLUMNS}""",
            team_id, tool, deny, require_approval, timeout_ms, rate_per_minute, reason,
            created_by, expires_at,
        )
        return team_rule_from_row(row)

    async def list(self, team_id: str | None) -> list[TeamRule]:
        rows = await self._pool.fetch(
            f"""SELECT {COLUMNS} FROM team_rules WHERE ($1::text IS NULL OR team_id = $1)
                ORDER BY team_id, tool""",
            team_id,
        )
        return [team_rule_from_row(r) for r in rows]

    async def delete(self, *, team_id: str, tool: str) -> TeamRule | None:
        row = await self._pool.fetchrow(
            f"DELETE FROM team_rules WHERE team_id = $1 AND tool = $2 RETURNING {COLUMNS}",
            team_id, tool,
        )
        return team_rule_from_row(row) if row else None
