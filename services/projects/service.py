"""The project service: project.list, project.get, project.create and project.update, each a
handler over the projects' store."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.projects import manifests, store
from services.sdk import CallContext, Service
from services.sdk.errors import Conflict
from services.sdk.records import agent_of, record_id, team_of
from services.sdk.service import ToolDef, ToolResult


def _ref(project_id: object) -> dict[str, Any]:
    return {"type": "project", "id": str(project_id)}


def _name_taken(name: str) -> Conflict:
    return Conflict(f"your team already has a project named {name[:80]!r}")


def service(pool: asyncpg.Pool) -> Service:
    """The project service, bound to one connection pool."""

    async def list_(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        limit = int(args.get("limit", manifests.LIST_DEFAULT))
        projects = [store.project_json(r)
                    for r in await store.list_projects(pool, team, limit, args.get("status"))]
        return ToolResult(output={"projects": projects, "count": len(projects)},
                          object_refs=[_ref(p["project_id"]) for p in projects])

    async def get(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        pid = record_id(args["project_id"], "project")
        return ToolResult(output=await store.get_project(pool, team, pid), object_refs=[_ref(pid)])

    async def create(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        try:
            row = await store.insert_project(pool, team, agent, args["name"],
                                             args.get("description", ""))
        except asyncpg.UniqueViolationError:
            raise _name_taken(args["name"]) from None
        return ToolResult(output=store.project_json(row), object_refs=[_ref(row["project_id"])])

    async def update(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        pid = record_id(args["project_id"], "project")
        try:
            row, changed = await store.update_project(pool, team, pid, int(args["expected_version"]),
                                                      args)
        except asyncpg.UniqueViolationError:
            raise _name_taken(args["name"]) from None
        return ToolResult(output={**store.project_json(row), "changed": changed},
                          object_refs=[_ref(pid)])

    return Service(name="projects", tools=[
        ToolDef(manifests.LIST, list_),
        ToolDef(manifests.GET, get),
        ToolDef(manifests.CREATE, create),
        ToolDef(manifests.UPDATE, update),
    ])
