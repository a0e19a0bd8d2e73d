"""The SQL of the task service: list, read and create a team's tasks, and change one under its
row lock when the version the caller read is still the current one."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from services.sdk.records import iso, not_found, version_conflict

_COLUMNS = ("task_id, title, description, status, created_by, created_at, project_id, assignee,"
            " version, updated_at, completed_at")
_ORDER = " ORDER BY created_at DESC LIMIT $2"
# One statement per filter combination, each able to use its index (no `$3 IS NULL OR ...`).
_LIST = {
    (False, False): f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1" + _ORDER,
    (True, False): f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 AND status = $3" + _ORDER,
    (False, True): f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 AND project_id = $3" + _ORDER,
    (True, True): (f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 AND status = $3"
                   " AND project_id = $4" + _ORDER),
}
_GET = f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 AND task_id = $2"
_INSERT = (f"INSERT INTO tasks (task_id, team_id, title, description, created_by, project_id)"
           f" VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_COLUMNS}")
_UPDATE = (f"UPDATE tasks SET title = $3, description = $4, status = $5, project_id = $6,"
           f" assignee = $7, version = version + 1, updated_at = now(),"
           f" completed_at = CASE WHEN $5 = 'done' THEN coalesce(completed_at, now()) END"
           f" WHERE team_id = $1 AND task_id = $2 RETURNING {_COLUMNS}")
MUTABLE = ("title", "description", "status", "project_id", "assignee")

# The new values of some of MUTABLE, from the call's args and the row as it is.
Change = Callable[[dict[str, Any], asyncpg.Record], dict[str, Any]]


def task_json(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "task_id": str(row["task_id"]),
        "title": row["title"],
        "description": row["description"],
        "status": row["status"],
        "created_by": row["created_by"],
        "created_at": iso(row["created_at"]),
        "project_id": str(row["project_id"]) if row["project_id"] else None,
        "assignee": row["assignee"],
        "version": row["version"],
        "updated_at": iso(row["updated_at"]),
        "completed_at": iso(row["completed_at"]),
    }


async def list_tasks(pool: asyncpg.Pool, team: str, limit: int, status: str | None,
                     project: uuid.UUID | None) -> list[asyncpg.Record]:
    filters = [v for v in (status, project) if v is not None]
    sql = _LIST[(status is not None, project is not None)]
    return await pool.fetch(sql, team, limit, *filters)  # type: ignore[no-any-return]


async def get_task(pool: asyncpg.Pool, team: str, tid: uuid.UUID) -> asyncpg.Record | None:
    return await pool.fetchrow(_GET, team, tid)


async def insert_task(pool: asyncpg.Pool, team: str, agent: str, title: str, description: str,
                      project: uuid.UUID | None) -> asyncpg.Record:
    """Raises asyncpg.ForeignKeyViolationError when the project is not one of the team's."""
    return await pool.fetchrow(_INSERT, uuid.uuid4(), team, title, description, agent, project)


async def update_task(pool: asyncpg.Pool, team: str, tid: uuid.UUID, expected: int,
                      change: Change, args: dict[str, Any]) -> tuple[asyncpg.Record, bool]:
    """Lock the task, check the version, apply `change`: (the row now, whether it changed). A
    change that changes nothing writes nothing (and bumps no version). Raises
    asyncpg.ForeignKeyViolationError when the new project is not one of the team's."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(f"{_GET} FOR UPDATE", team, tid)
        if row is None:
            raise not_found("task", tid)
        if row["version"] != expected:
            raise version_conflict("task", tid, expected, row["version"])
        new = {k: row[k] for k in MUTABLE} | change(args, row)
        changed = any(new[k] != row[k] for k in MUTABLE)
        if changed:
            row = await conn.fetchrow(_UPDATE, team, tid, new["title"], new["description"],
                                      new["status"], new["project_id"], new["assignee"])
    return row, changed
