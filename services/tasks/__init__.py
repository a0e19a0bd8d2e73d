"""Category B tasks: task.list, task.get (read), task.create, task.update, task.complete and
task.assign (write). Tasks may belong to a project of their team; updates name the version
they read (optimistic concurrency: a stale one is version_conflict, nothing written)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from services.sdk import CallContext, Service
from services.sdk.records import (
    agent_of,
    iso,
    not_found,
    record_id,
    team_of,
    version_conflict,
)
from services.sdk.service import ToolDef, ToolResult
from services.tasks import manifests
from services.tasks.manifests import STATUSES

__all__ = ["STATUSES", "service", "task_json"]

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
_MUTABLE = ("title", "description", "status", "project_id", "assignee")

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


def _ref(task_id: object) -> dict[str, Any]:
    return {"type": "task", "id": str(task_id)}


def _project(value: str | None) -> uuid.UUID | None:
    return None if value is None else record_id(value, "project")


def _edits(args: dict[str, Any], row: asyncpg.Record) -> dict[str, Any]:
    new = {k: args[k] for k in ("title", "description", "status") if k in args}
    if "project_id" in args:
        new["project_id"] = _project(args["project_id"])
    return new


def _completion(args: dict[str, Any], row: asyncpg.Record) -> dict[str, Any]:
    return {"status": "done"}


def _assignment(args: dict[str, Any], row: asyncpg.Record) -> dict[str, Any]:
    return {"assignee": args["assignee"]}


def service(pool: asyncpg.Pool) -> Service:
    """The task service, bound to one connection pool."""

    async def list_tasks(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        limit = int(args.get("limit", manifests.LIST_DEFAULT))
        filters = [v for v in (args.get("status"), _project(args.get("project_id"))) if v is not None]
        sql = _LIST[("status" in args, "project_id" in args)]
        tasks = [task_json(r) for r in await pool.fetch(sql, team, limit, *filters)]
        return ToolResult(output={"tasks": tasks, "count": len(tasks)},
                          object_refs=[_ref(t["task_id"]) for t in tasks])

    async def get_task(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["task_id"], "task")
        row = await pool.fetchrow(_GET, team, tid)
        if row is None:
            raise not_found("task", tid)
        return ToolResult(output=task_json(row), object_refs=[_ref(tid)])

    async def create_task(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        project = _project(args.get("project_id"))
        try:
            row = await pool.fetchrow(_INSERT, uuid.uuid4(), team, args["title"],
                                      args.get("description", ""), agent, project)
        except asyncpg.ForeignKeyViolationError:  # no such project in this team
            raise not_found("project", project) from None
        refs = [_ref(row["task_id"])] + ([{"type": "project", "id": str(project)}] if project else [])
        return ToolResult(output=task_json(row), object_refs=refs)

    def updater(change: Change) -> Callable[[dict[str, Any], CallContext], Any]:
        """A write tool: lock the task, check the version, apply `change`; a change that
        changes nothing writes nothing (and bumps no version)."""

        async def run(args: dict[str, Any], ctx: CallContext) -> ToolResult:
            team = team_of(ctx)
            tid = record_id(args["task_id"], "task")
            expected = int(args["expected_version"])
            try:
                async with pool.acquire() as conn, conn.transaction():
                    row = await conn.fetchrow(f"{_GET} FOR UPDATE", team, tid)
                    if row is None:
                        raise not_found("task", tid)
                    if row["version"] != expected:
                        raise version_conflict("task", tid, expected, row["version"])
                    new = {k: row[k] for k in _MUTABLE} | change(args, row)
                    changed = any(new[k] != row[k] for k in _MUTABLE)
                    if changed:
                        row = await conn.fetchrow(_UPDATE, team, tid, new["title"],
                                                  new["description"], new["status"],
                                                  new["project_id"], new["assignee"])
            except asyncpg.ForeignKeyViolationError:
                raise not_found("project", args.get("project_id")) from None
            return ToolResult(output={**task_json(row), "changed": changed}, object_refs=[_ref(tid)])

        return run

    return Service(
        name="task",
        tools=[
            ToolDef(manifest=manifests.LIST, handler=list_tasks),
            ToolDef(manifest=manifests.CREATE, handler=create_task),
            ToolDef(manifest=manifests.GET, handler=get_task),
            ToolDef(manifest=manifests.UPDATE, handler=updater(_edits)),
            ToolDef(manifest=manifests.COMPLETE, handler=updater(_completion)),
            ToolDef(manifest=manifests.ASSIGN, handler=updater(_assignment)),
        ],
    )

