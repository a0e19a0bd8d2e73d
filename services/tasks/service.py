"""The task service: task.list, task.get, task.create, task.update, task.complete and
task.assign, each a handler over the tasks' store."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from services.sdk import CallContext, Service
from services.sdk.records import agent_of, not_found, record_id, team_of
from services.sdk.service import ToolDef, ToolResult
from services.tasks import manifests, store


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
        rows = await store.list_tasks(pool, team, limit, args.get("status"),
                                      _project(args.get("project_id")))
        tasks = [store.task_json(r) for r in rows]
        return ToolResult(output={"tasks": tasks, "count": len(tasks)},
                          object_refs=[_ref(t["task_id"]) for t in tasks])

    async def get_task(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["task_id"], "task")
        row = await store.get_task(pool, team, tid)
        if row is None:
            raise not_found("task", tid)
        return ToolResult(output=store.task_json(row), object_refs=[_ref(tid)])

    async def create_task(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        project = _project(args.get("project_id"))
        try:
            row = await store.insert_task(pool, team, agent, args["title"],
                                          args.get("description", ""), project)
        except asyncpg.ForeignKeyViolationError:  # no such project in this team
            raise not_found("project", project) from None
        refs = [_ref(row["task_id"])] + ([{"type": "project", "id": str(project)}] if project else [])
        return ToolResult(output=store.task_json(row), object_refs=refs)

    def updater(change: store.Change) -> Callable[[dict[str, Any], CallContext], Any]:
        """A write tool: the task changed by `change`, if the caller read its current version."""

        async def run(args: dict[str, Any], ctx: CallContext) -> ToolResult:
            team = team_of(ctx)
            tid = record_id(args["task_id"], "task")
            try:
                row, changed = await store.update_task(pool, team, tid, int(args["expected_version"]),
                                                       change, args)
            except asyncpg.ForeignKeyViolationError:
                raise not_found("project", args.get("project_id")) from None
            return ToolResult(output={**store.task_json(row), "changed": changed},
                              object_refs=[_ref(tid)])

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
