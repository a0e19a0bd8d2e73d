"""Category B agent templates (seed 001): template.list, template.read (read; every agent of
the team may call them without a grant, by policy), template.create, template.update and
template.delete (write; each needs its own grant). An update reports a template.updated event
to the proxy, which writes it with the call's other events."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

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
from services.templates import manifests
from services.templates.domain import Template, new_template, updated

__all__ = ["service"]

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


def _ref(template_id: object, version: int | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"type": "template", "id": str(template_id)}
    if version is not None:
        ref["version"] = version
    return ref


def _name_taken(name: str) -> ToolError:
    return ToolError(f"your team already has a template named {name[:80]!r}", code=CONFLICT)


async def _locked(conn: asyncpg.Connection, team: str, tid: uuid.UUID,
                  expected: int | None) -> asyncpg.Record:
    row = await conn.fetchrow(f"{_GET} FOR UPDATE", team, tid)
    if row is None:
        raise not_found("template", tid)
    if expected is not None and row["version"] != expected:
        raise version_conflict("template", tid, expected, row["version"])
    return row


def service(pool: asyncpg.Pool) -> Service:
    """The template service, bound to one connection pool."""

    async def list_(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        rows = await pool.fetch(_LIST, team, int(args.get("limit", manifests.LIST_DEFAULT)))
        items = [{"template_id": str(r["template_id"]), "name": r["name"], "version": r["version"],
                  "default_profile_id": r["default_profile_id"], "updated_at": iso(r["updated_at"])}
                 for r in rows]
        return ToolResult(output={"templates": items, "count": len(items)},
                          object_refs=[_ref(t["template_id"], t["version"]) for t in items])

    async def read(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["template_id"], "template")
        row = await pool.fetchrow(_GET, team, tid)
        if row is None:
            raise not_found("template", tid)
        return ToolResult(output=template_json(row), object_refs=[_ref(tid, row["version"])])

    async def create(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        t = new_template(str(uuid.uuid4()), args["name"], args["content_md"],
                         args["default_profile_id"])
        try:
            row = await pool.fetchrow(_INSERT, uuid.UUID(t.template_id), team, t.name,
                                      t.content_md, t.default_profile_id, agent)
        except asyncpg.UniqueViolationError:
            raise _name_taken(t.name) from None
        return ToolResult(output=template_json(row), object_refs=[_ref(t.template_id, 1)])

    async def update(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        tid = record_id(args["template_id"], "template")
        try:
            async with pool.acquire() as conn, conn.transaction():
                row = await _locked(conn, team, tid, args.get("expected_version"))
                change = updated(_domain(row), content_md=args.get("content_md"),
                                 name=args.get("name"),
                                 default_profile_id=args.get("default_profile_id"))
                if change.changed_fields:
                    a = change.after
                    row = await conn.fetchrow(_UPDATE, team, tid, a.name, a.content_md, a.version,
                                              a.default_profile_id, agent)
        except asyncpg.UniqueViolationError:
            raise _name_taken(args.get("name", "")) from None
        out = {**template_json(row), "changed": bool(change.changed_fields),
               "content_changed": change.content_changed}
        return ToolResult(output=out, object_refs=[_ref(tid, row["version"])],
                          observations=[change.event()] if change.changed_fields else [])

    async def delete(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        tid = record_id(args["template_id"], "template")
        async with pool.acquire() as conn, conn.transaction():
            await _locked(conn, team, tid, args.get("expected_version"))
            await conn.execute(_DELETE, team, tid)
        return ToolResult(output={"template_id": str(tid), "deleted": True}, object_refs=[_ref(tid)])

    return Service(name="templates", tools=[
        ToolDef(manifests.LIST, list_),
        ToolDef(manifests.READ, read),
        ToolDef(manifests.CREATE, create),
        ToolDef(manifests.UPDATE, update),
        ToolDef(manifests.DELETE, delete),
    ])
