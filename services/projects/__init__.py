"""Category B projects: project.list, project.get (read), project.create, project.update
(write), with optimistic concurrency on updates (a stale expected_version is version_conflict)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.projects import manifests
from services.projects.manifests import STATUSES
from services.sdk import CallContext, Service, ToolError
from services.sdk.records import (
    CONFLICT,
    agent_of,
    iso,
    not_found,
    record_id,
    team_of,
    version_conflict,
)
from services.sdk.service import ToolDef, ToolResult

__all__ = ["STATUSES", "service"]

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


def project_json(row: asyncpg.Record) -> dict[str, Any]:
    return {"project_id": str(row["project_id"]), "name": row["name"],
            "description": row["description"], "status": row["status"],
            "version": row["version"], "created_by": row["created_by"],
            "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"])}


def _ref(project_id: object) -> dict[str, Any]:
    return {"type": "project", "id": str(project_id)}


def _name_taken(name: str) -> ToolError:
    return ToolError(f"your team already has a project named {name[:80]!r}", code=CONFLICT)


def service(pool: asyncpg.Pool) -> Service:
    """The project service, bound to one connection pool."""

    async def list_(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        limit = int(args.get("limit", manifests.LIST_DEFAULT))
        if "status" in args:
            rows = await pool.fetch(_LIST_BY_STATUS, team, limit, args["status"])
        else:
            rows = await pool.fetch(_LIST_ALL, team, limit)
        projects = [project_json(r) for r in rows]
        return ToolResult(output={"projects": projects, "count": len(projects)},
                          object_refs=[_ref(p["project_id"]) for p in projects])

    async def get(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        pid = record_id(args["project_id"], "project")
        async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            row = await conn.fetchrow(_GET, team, pid)
            if row is None:
                raise not_found("project", pid)
            counts = {r["status"]: r["n"] for r in await conn.fetch(_COUNTS, team, pid)}
        out = project_json(row)
        out["task_counts"] = {s: counts.get(s, 0) for s in ("open", "in_progress", "done")}
        return ToolResult(output=out, object_refs=[_ref(pid)])

    async def create(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        try:
            row = await pool.fetchrow(_INSERT, uuid.uuid4(), team, args["name"],
                                      args.get("description", ""), agent)
        except asyncpg.UniqueViolationError:
            raise _name_taken(args["name"]) from None
        return ToolResult(output=project_json(row), object_refs=[_ref(row["project_id"])])

    async def update(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        pid = record_id(args["project_id"], "project")
        expected = int(args["expected_version"])
        try:
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
        except asyncpg.UniqueViolationError:
            raise _name_taken(args["name"]) from None
        return ToolResult(output={**project_json(row), "changed": changed}, object_refs=[_ref(pid)])

    return Service(name="projects", tools=[
        ToolDef(manifests.LIST, list_),
        ToolDef(manifests.GET, get),
        ToolDef(manifests.CREATE, create),
        ToolDef(manifests.UPDATE, update),
    ])
