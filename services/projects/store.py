"""The SQL of the project service: list, read (with its tasks' counts) and create a team's
projects, and change one under its row lock when the caller read its current version."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.sdk.records import iso, not_found, version_conflict

_COLUMNS = "project_id, name, description, status, version, created_by, created_at, updated_at"
_LIST_ALL = f"SELECT {_COLUMNS} FROM projects WHERE team_id = $1 ORDER BY updated_at DESC LIMIT $2"
_LIST_BY_STATUS = (f"SELECT {_COLUMNS} FROM projects WHERE team_id = $1 AND status = $3"
                   " ORDER BY updated_at DESC LIMIT $2")
_GET = f"SELECT {_COLUMNS} FROM projects WHERE team_id = $1 AND project_id = $2"
_COUNTS = ("SELECT status, count(*) AS n FROM tasks WHERE team_id = $1 AND project_id = $2"
           " GROUP BY status")
_INSERT = (f"INSERT INTO projects (project_id, team_id, name, description, created_by)"
           f" VALUES ($1, $2, $3, $4, $5) RETURNING {_COLUMNS}")
_LOCK = f"{_GET} FOR UPDATE"
_UPDATE = (f"UPDATE projects SET name = $3, description = $4, status = $5,"
           f" version = version + 1, updated_at = now()"
           f" WHERE team_id = $1 AND project_id = $2 RETURNING {_COLUMNS}")
_TASK_STATUSES = ("open", "in_progress", "done")


def project_json(row: asyncpg.Record) -> dict[str, Any]:
    return {"project_id": str(row["project_id"]), "name": row["name"],
            "description": row["description"], "status": row["status"],
            "version": row["version"], "created_by": row["created_by"],
            "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"])}


async def list_projects(pool: asyncpg.Pool, team: str, limit: int,
                        status: str | None) -> list[asyncpg.Record]:
    if status is not None:
        return await pool.fetch(_LIST_BY_STATUS, team, limit, status)  # type: ignore[no-any-return]
    return await pool.fetch(_LIST_ALL, team, limit)  # type: ignore[no-any-return]


async def get_project(pool: asyncpg.Pool, team: str, pid: uuid.UUID) -> dict[str, Any]:
    """The project with its tasks counted per status, read in one snapshot."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        row = await conn.fetchrow(_GET, team, pid)
        if row is None:
            raise not_found("project", pid)
        counts = {r["status"]: r["n"] for r in await conn.fetch(_COUNTS, team, pid)}
    out = project_json(row)
    out["task_counts"] = {s: counts.get(s, 0) for s in _TASK_STATUSES}
    return out


async def insert_project(pool: asyncpg.Pool, team: str, agent: str, name: str,
                         description: str) -> asyncpg.Record:
    """Raises asyncpg.UniqueViolationError when the team has a project of that name."""
    return await pool.fetchrow(_INSERT, uuid.uuid4(), team, name, description, agent)


async def update_project(pool: asyncpg.Pool, team: str, pid: uuid.UUID, expected: int,
                         args: dict[str, Any]) -> tuple[asyncpg.Record, bool]:
    """(the row now, whether it changed); a change that changes nothing writes nothing. Raises
    asyncpg.UniqueViolationError when the new name is another project's of the team."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(_LOCK, team, pid)
        if row is None:
            raise not_found("project", pid)
        if row["version"] != expected:
            raise version_conflict("project", pid, expected, row["version"])
        new = {k: args.get(k, row[k]) for k in ("name", "description", "status")}
        changed = any(new[k] != row[k] for k in new)
        if changed:
            row = await conn.fetchrow(_UPDATE, team, pid, new["name"], new["description"],
                                      new["status"])
    return row, changed
