"""Category B task tools: list and create the caller team's tasks, kept in Postgres."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.sdk import CallContext, Cost, Service, ToolError
from services.sdk.service import ToolDef, ToolResult, make_manifest

STATUSES = ["open", "in_progress", "done"]
LIST_DEFAULT = 50
LIST_MAX = 100

_TASK_FIELDS = {
    "task_id": {"type": "string"},
    "title": {"type": "string"},
    "description": {"type": "string"},
    "status": {"type": "string", "enum": STATUSES},
    "created_by": {"type": "string"},
    "created_at": {"type": "string"},
}

LIST_MANIFEST = make_manifest(
    {
        "tool_id": "task.list",
        "version": "1.0.0",
        "category": "B",
        "action": "read",
        "description": "List your team's tasks, newest first, optionally filtered by status.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "status": {"type": "string", "enum": STATUSES},
                "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX},
            },
        },
        "output_schema": {
            "type": "object",
            "required": ["tasks", "count"],
            "properties": {
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": list(_TASK_FIELDS),
                        "properties": _TASK_FIELDS,
                    },
                },
                "count": {"type": "integer", "minimum": 0},
            },
        },
        "cost": Cost(per_call=0.0001),
        "network": False,
    }
)

CREATE_MANIFEST = make_manifest(
    {
        "tool_id": "task.create",
        "version": "1.0.0",
        "category": "B",
        "action": "write",
        "description": "Create an open task for your team.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"},
                "description": {"type": "string", "maxLength": 4000},
            },
        },
        "output_schema": {
            "type": "object",
            "required": ["task_id", "title", "description", "status", "created_at"],
            "properties": {k: v for k, v in _TASK_FIELDS.items() if k != "created_by"},
        },
        "cost": Cost(per_call=0.0002),
        "network": False,
    }
)

_COLUMNS = "task_id, title, description, status, created_by, created_at"
# Two statements rather than `$2 IS NULL OR status = $2`, so both can use tasks_team_status.
_LIST_ALL = f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 ORDER BY created_at DESC LIMIT $2"
_LIST_BY_STATUS = (
    f"SELECT {_COLUMNS} FROM tasks WHERE team_id = $1 AND status = $3"
    " ORDER BY created_at DESC LIMIT $2"
)
_INSERT = (
    "INSERT INTO tasks (task_id, team_id, title, description, created_by)"
    " VALUES ($1, $2, $3, $4, $5) RETURNING status, created_at"
)


def _team(ctx: CallContext) -> str:
    if not ctx.team_id:
        raise ToolError("the call carries no team")
    return ctx.team_id


def _task(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "task_id": str(row["task_id"]),
        "title": row["title"],
        "description": row["description"],
        "status": row["status"],
        "created_by": row["created_by"],
        "created_at": row["created_at"].isoformat(),
    }


def service(pool: asyncpg.Pool) -> Service:
    """The task service, bound to one connection pool."""

    async def list_tasks(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        team = _team(ctx)
        limit = int(args.get("limit", LIST_DEFAULT))
        status = args.get("status")
        if status is None:
            rows = await pool.fetch(_LIST_ALL, team, limit)
        else:
            rows = await pool.fetch(_LIST_BY_STATUS, team, limit, status)
        tasks = [_task(r) for r in rows]
        return {"tasks": tasks, "count": len(tasks)}

    async def create_task(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = _team(ctx)
        if not ctx.agent_id:
            raise ToolError("the call carries no agent")
        task_id = uuid.uuid4()
        title: str = args["title"]
        description: str = args.get("description", "")
        row = await pool.fetchrow(_INSERT, task_id, team, title, description, ctx.agent_id)
        created = {
            "task_id": str(task_id),
            "title": title,
            "description": description,
            "status": row["status"],
            "created_at": row["created_at"].isoformat(),
        }
        return ToolResult(output=created, object_refs=[{"type": "task", "id": str(task_id)}])

    return Service(
        name="task",
        tools=[
            ToolDef(manifest=LIST_MANIFEST, handler=list_tasks),
            ToolDef(manifest=CREATE_MANIFEST, handler=create_task),
        ],
    )
