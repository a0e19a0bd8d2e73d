"""Daily quotas, configured by governance per team (and optionally per agent) in Postgres."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

@dataclass(frozen=True, slots=True)
class Quota:
    """Limits for one day; None means unlimited."""

    team_id: str
    agent_id: str | None
    invocations: int | None
    tokens: int | None
    compute_units: float | None
    cost_1t: float | None
    updated_by: str = ""
    updated_at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "team_id": self.team_id, "agent_id": self.agent_id,
            "invocations": self.invocations, "tokens": self.tokens,
            "compute_units": self.compute_units, "cost_1t": self.cost_1t,
            "updated_by": self.updated_by,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def quota_from_row(r: asyncpg.Record) -> Quota:
    return Quota(
        team_id=r["team_id"], agent_id=r["agent_id"] or None, invocations=r["invocations"],
        tokens=r["tokens"], compute_units=r["compute_units"], cost_1t=r["cost_1t"],
        updated_by=r["updated_by"], updated_at=r["updated_at"],
    )


QUOTA_COLUMNS = "team_id, agent_id, invocations, tokens, compute_units, cost_1t, updated_by, updated_at"


class QuotaRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def put(self, q: Quota, *, by: str) -> Quota:
        row = await self._pool.fetchrow(
            f"""INSERT INTO quotas (team_id, agent_id, invocations, tokens, compute_units,
                                    cost_1t, updated_by)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (team_id, agent_id) DO UPDATE SET
                    invocations = EXCLUDED.invocations, tokens = EXCLUDED.tokens,
                    compute_units = EXCLUDED.compute_units, cost_1t = EXCLUDED.cost_1t,
                    updated_by = EXCLUDED.updated_by, updated_at = now()
                RETURNING {QUOTA_COLUMNS}""",
            q.team_id, q.agent_id or "", q.invocations, q.tokens, q.compute_units, q.cost_1t, by,
        )
        return quota_from_row(row)

    async def list(self, team_id: str | None) -> list[Quota]:
        rows = await self._pool.fetch(
            f"""SELECT {QUOTA_COLUMNS} FROM quotas WHERE ($1::text IS NULL OR team_id = $1)
                ORDER BY team_id, agent_id""",
            team_id,
        )
        return [quota_from_row(r) for r in rows]

    async def delete(self, team_id: str, agent_id: str | None) -> bool:
        result = await self._pool.execute(
            "DELETE FROM quotas WHERE team_id = $1 AND agent_id = $2", team_id, agent_id or ""
        )
        return result.endswith(" 1")
