"""Tool sets: a team's named subsets of the catalog (kept in Postgres), and every replica's copy
of them in memory, followed live (a NOTIFY from any replica reloads them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from infra.pg_listener import Follower, Listener

CHANNEL = "toolproxy_toolsets"
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
NAME_RE = re.compile(NAME_PATTERN, re.ASCII)
MAX_TOOLS = 128  # a short list for a model is the point
MAX_SETS_PER_TEAM = 100
MAX_DESCRIPTION = 500

_COLUMNS = "team_id, name, tools, description, created_by, created_at, updated_by, updated_at"


def is_valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME_RE.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class ToolSet:
    team_id: str
    name: str
    tools: tuple[str, ...]
    description: str
    created_by: str
    created_at: datetime
    updated_by: str
    updated_at: datetime

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.tools)

    def as_json(self) -> dict[str, Any]:
        return {"team_id": self.team_id, "name": self.name, "tools": list(self.tools),
                "description": self.description, "endpoint": f"/mcp/sets/{self.name}",
                "created_by": self.created_by, "created_at": self.created_at.isoformat(),
                "updated_by": self.updated_by, "updated_at": self.updated_at.isoformat()}


def _row(r: asyncpg.Record) -> ToolSet:
    return ToolSet(team_id=r["team_id"], name=r["name"], tools=tuple(r["tools"]),
                   description=r["description"], created_by=r["created_by"],
                   created_at=r["created_at"], updated_by=r["updated_by"],
                   updated_at=r["updated_at"])


class TooManySets(Exception):
    """The team has MAX_SETS_PER_TEAM sets already."""


class ToolSetRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def put(self, *, team_id: str, name: str, tools: list[str], description: str,
                  by: str) -> tuple[ToolSet, bool]:
        """Create the set, or replace its tools and description; (the set, created)."""
        async with self._pool.acquire() as conn, conn.transaction():
            # One writer per team at a time: the count below cannot be raced past.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('toolsets:' || $1))", team_id)
            exists = await conn.fetchval(
                "SELECT 1 FROM toolsets WHERE team_id = $1 AND name = $2", team_id, name)
            if exists is None:
                count = await conn.fetchval("SELECT count(*) FROM toolsets WHERE team_id = $1", team_id)
                if count >= MAX_SETS_PER_TEAM:
                    raise TooManySets(f"team {team_id!r} has {MAX_SETS_PER_TEAM} tool sets already")
            row = await conn.fetchrow(
                f"""INSERT INTO toolsets (team_id, name, tools, description, created_by, updated_by)
                    VALUES ($1, $2, $3, $4, $5, $5)
                    ON CONFLICT (team_id, name) DO UPDATE
                    SET tools = EXCLUDED.tools, description = EXCLUDED.description,
                        updated_by = EXCLUDED.updated_by, updated_at = now()
                    RETURNING {_COLUMNS}""",
                team_id, name, tools, description, by)
        assert row is not None
        return _row(row), exists is None

    async def list(self, team_id: str | None) -> list[ToolSet]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM toolsets WHERE ($1::text IS NULL OR team_id = $1)
                ORDER BY team_id, name LIMIT 5000""", team_id)
        return [_row(r) for r in rows]

    async def get(self, team_id: str, name: str) -> ToolSet | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM toolsets WHERE team_id = $1 AND name = $2", team_id, name)
        return _row(row) if row else None

    async def delete(self, team_id: str, name: str) -> ToolSet | None:
        row = await self._pool.fetchrow(
            f"DELETE FROM toolsets WHERE team_id = $1 AND name = $2 RETURNING {_COLUMNS}",
            team_id, name)
        return _row(row) if row else None


class ToolSets:
    """Every team's sets in memory. Any change (a NOTIFY, from whichever replica) reloads them
    all: sets are small and rarely change; a lost listener reloads too, and every 30 s."""

    def __init__(self, pool: asyncpg.Pool, listener: Listener, *, every_s: float = 30.0) -> None:
        self._pool = pool
        self._listener = listener
        self._every_s = every_s
        self._sets: dict[tuple[str, str], frozenset[str]] = {}
        self._follower: Follower | None = None

    async def start(self) -> None:
        self._follower = await self._listener.follow(
            CHANNEL, reload=self.reload, every_s=self._every_s, reload_first=True, name="toolsets")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    async def reload(self) -> None:
        rows = await self._pool.fetch("SELECT team_id, name, tools FROM toolsets")
        self._sets = {(r["team_id"], r["name"]): frozenset(r["tools"]) for r in rows}

    def tools(self, team_id: str, name: str) -> frozenset[str] | None:
        """The set's tool names, or None: no such set in this team (another team's is none)."""
        return self._sets.get((team_id, name))
