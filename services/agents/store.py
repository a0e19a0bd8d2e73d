"""Registered agents in Postgres: id (global: it names the NATS subject), team, description
and input schema. Reads are team-scoped: another team's agent does not exist for a caller."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg


class AgentTaken(Exception):
    """The id is registered to another team."""


@dataclass(frozen=True, slots=True)
class AgentRecord:
    agent_id: str
    team_id: str
    description: str
    input_schema: dict[str, Any]
    created_by: str
    created_at: datetime
    updated_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id, "team_id": self.team_id, "description": self.description,
            "input_schema": self.input_schema, "created_by": self.created_by,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
        }


_COLUMNS = "agent_id, team_id, description, input_schema, created_by, created_at, updated_at"


def _record(r: asyncpg.Record) -> AgentRecord:
    return AgentRecord(r["agent_id"], r["team_id"], r["description"], dict(r["input_schema"]),
                       r["created_by"], r["created_at"], r["updated_at"])


class AgentRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def put(self, *, agent_id: str, team_id: str, description: str,
                  input_schema: dict[str, Any], created_by: str) -> tuple[AgentRecord, bool]:
        """Register, or replace the description and schema of the team's own agent:
        (record, created). Raises AgentTaken for an id another team holds."""
        row = await self._pool.fetchrow(
            f"""INSERT INTO agents (agent_id, team_id, description, input_schema, created_by)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (agent_id) DO UPDATE SET description = EXCLUDED.description,
                    input_schema = EXCLUDED.input_schema, created_by = EXCLUDED.created_by,
                    updated_at = now()
                WHERE agents.team_id = EXCLUDED.team_id
                RETURNING {_COLUMNS}, (xmax = 0) AS created""",
            agent_id, team_id, description, input_schema, created_by,
        )
        if row is None:
            raise AgentTaken(agent_id)
        return _record(row), bool(row["created"])

    async def get(self, team_id: str, agent_id: str) -> AgentRecord | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM agents WHERE agent_id = $1 AND team_id = $2", agent_id, team_id)
        return _record(row) if row is not None else None

    async def list(self, team_id: str | None) -> list[AgentRecord]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM agents WHERE ($1::text IS NULL OR team_id = $1)
                ORDER BY team_id, agent_id LIMIT 1000""", team_id)
        return [_record(r) for r in rows]

    async def ids(self, team_id: str, limit: int = 200) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT agent_id FROM agents WHERE team_id = $1 ORDER BY agent_id LIMIT $2", team_id, limit)
        return [r["agent_id"] for r in rows]

    async def remove(self, team_id: str, agent_id: str) -> AgentRecord | None:
        row = await self._pool.fetchrow(
            f"DELETE FROM agents WHERE agent_id = $1 AND team_id = $2 RETURNING {_COLUMNS}",
            agent_id, team_id)
        return _record(row) if row is not None else None
