"""The SQL of the template service: list, read, create, and change or delete a team's template
under its row lock (when the caller names the version it read, only if it is still current)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from services.sdk.records import iso, not_found, version_conflict
from services.templates.ops import Template, Update

_COLUMNS = "template_id, name, content_md, version, default_profile_id, updated_at"
_LIST = ("SELECT template_id, name, version, default_profile_id, updated_at FROM templates"
         " WHERE team_id = $1 ORDER BY updated_at DESC, template_id LIMIT $2")
_GET = f"SELECT {_COLUMNS} FROM templates WHERE team_id = $1 AND template_id = $2"
_INSERT = (f"INSERT INTO templates (template_id, team_id, name, content_md, default_profile_id,"
           f" created_by, updated_by) VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING {_COLUMNS}")
_UPDATE = (f"UPDATE templates SET name = $3, content_md = $4, version = $5,"
           f" default_profile_id = $6, updated_by = $7, updated_at = now()"
           f" WHERE team_id = $1 AND template_id = $2 RETURNING {_COLUMNS}")
_DELETE = "DELETE FROM templates WHERE team_id = $1 AND template_id = $2"


def template_json(row: asyncpg.Record) -> dict[str, Any]:
    return {"template_id": str(row["template_id"]), "name": row["name"],
            "content_md": row["content_md"], "version": row["version"],
            "default_profile_id": row["default_profile_id"], "updated_at": iso(row["updated_at"])}


def _domain(row: asyncpg.Record) -> Template:
    return Template(str(row["template_id"]), row["name"], row["content_md"], row["version"],
                    row["default_profile_id"])


async def _locked(conn: asyncpg.Connection, team: str, tid: uuid.UUID,
                  expected: int | None) -> asyncpg.Record:
    row = await conn.fetchrow(f"{_GET} FOR UPDATE", team, tid)
    if row is None:
        raise not_found("template", tid)
    if expected is not None and row["version"] != expected:
        raise version_conflict("template", tid, expected, row["version"])
    return row


async def list_templates(pool: asyncpg.Pool, team: str, limit: int) -> list[dict[str, Any]]:
    """The team's templates without their content."""
    rows = await pool.fetch(_LIST, team, limit)
    return [{"template_id": str(r["template_id"]), "name": r["name"], "version": r["version"],
             "default_profile_id": r["default_profile_id"], "updated_at": iso(r["updated_at"])}
            for r in rows]


async def get_template(pool: asyncpg.Pool, team: str, tid: uuid.UUID) -> asyncpg.Record | None:
    return await pool.fetchrow(_GET, team, tid)


async def insert_template(pool: asyncpg.Pool, team: str, agent: str, t: Template) -> asyncpg.Record:
    """Raises asyncpg.UniqueViolationError when the team has a template of that name."""
    return await pool.fetchrow(_INSERT, uuid.UUID(t.template_id), team, t.name, t.content_md,
                               t.default_profile_id, agent)


async def update_template(pool: asyncpg.Pool, team: str, agent: str, tid: uuid.UUID,
                          expected: int | None,
                          edit: Callable[[Template], Update]) -> tuple[asyncpg.Record, Update]:
    """The template as `edit` leaves it (written only when a field changed), and the change.
    Raises asyncpg.UniqueViolationError when the new name is another template's of the team."""
    async with pool.acquire() as conn, conn.transaction():
        row = await _locked(conn, team, tid, expected)
        change = edit(_domain(row))
        if change.changed_fields:
            a = change.after
            row = await conn.fetchrow(_UPDATE, team, tid, a.name, a.content_md, a.version,
                                      a.default_profile_id, agent)
    return row, change


async def delete_template(pool: asyncpg.Pool, team: str, tid: uuid.UUID, expected: int | None) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await _locked(conn, team, tid, expected)
        await conn.execute(_DELETE, team, tid)
