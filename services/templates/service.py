"""The template service: template.list, template.read, template.create, template.update and
template.delete, each a handler over the templates' store and rules (ops)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.sdk import CallContext, Service
from services.sdk.errors import Conflict
from services.sdk.records import agent_of, not_found, record_id, team_of
from services.sdk.service import ToolDef, ToolResult
from services.templates import manifests, store
from services.templates.ops import Template, Update, new_template, updated


def _ref(template_id: object, version: int | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"type": "template", "id": str(template_id)}
    if version is not None:
        ref["version"] = version
    return ref


def _name_taken(name: str) -> Conflict:
    return Conflict(f"your team already has a template named {name[:80]!r}")


def service(pool: asyncpg.Pool) -> Service:
    """The template service, bound to one connection pool."""

    async def list_(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        items = await store.list_templates(pool, team, int(args.get("limit", manifests.LIST_DEFAULT)))
        return ToolResult(output={"templates": items, "count": len(items)},
                          object_refs=[_ref(t["template_id"], t["version"]) for t in items])

    async def read(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["template_id"], "template")
        row = await store.get_template(pool, team, tid)
        if row is None:
            raise not_found("template", tid)
        return ToolResult(output=store.template_json(row), object_refs=[_ref(tid, row["version"])])

    async def create(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        t = new_template(str(uuid.uuid4()), args["name"], args["content_md"],
                         args["default_profile_id"])
        try:
            row = await store.insert_template(pool, team, agent, t)
        except asyncpg.UniqueViolationError:
            raise _name_taken(t.name) from None
        return ToolResult(output=store.template_json(row), object_refs=[_ref(t.template_id, 1)])

    async def update(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        tid = record_id(args["template_id"], "template")

        def edit(t: Template) -> Update:
            return updated(t, content_md=args.get("content_md"), name=args.get("name"),
                           default_profile_id=args.get("default_profile_id"))

        try:
            row, change = await store.update_template(pool, team, agent, tid,
                                                      args.get("expected_version"), edit)
        except asyncpg.UniqueViolationError:
            raise _name_taken(args.get("name", "")) from None
        out = {**store.template_json(row), "changed": bool(change.changed_fields),
               "content_changed": change.content_changed}
        return ToolResult(output=out, object_refs=[_ref(tid, row["version"])],
                          observations=[change.event()] if change.changed_fields else [])

    async def delete(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["template_id"], "template")
        await store.delete_template(pool, team, tid, args.get("expected_version"))
        return ToolResult(output={"template_id": str(tid), "deleted": True}, object_refs=[_ref(tid)])

    return Service(name="templates", tools=[
        ToolDef(manifests.LIST, list_),
        ToolDef(manifests.READ, read),
        ToolDef(manifests.CREATE, create),
        ToolDef(manifests.UPDATE, update),
        ToolDef(manifests.DELETE, delete),
    ])
