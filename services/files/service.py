"""The file service: file.list, file.read, file.write and file.delete, handlers over the file
store with the paths normalized and the contents checked first."""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from typing import Any

import asyncpg

from services.files import manifests
from services.files.config import FileSettings
from services.files.errors import FileTooLarge, InvalidContent
from services.files.media import is_textual, media_type_for, utf8_prefix
from services.files.paths import normalize, normalize_prefix
from services.files.store import Blob, delete_file, list_files, read_file, write_file
from services.sdk import CallContext, Service
from services.sdk.records import agent_of, iso, not_found, team_of
from services.sdk.service import ToolDef, ToolResult


def _ref(path: str) -> dict[str, Any]:
    return {"type": "file", "id": path}


def _entry(row: asyncpg.Record) -> dict[str, Any]:
    return {"path": row["path"], "size": row["size"], "sha256": row["sha256"],
            "media_type": row["media_type"], "tags": list(row["tags"]),
            "updated_at": iso(row["updated_at"])}


def _content(args: dict[str, Any]) -> tuple[bytes, bool]:
    """(the bytes to store, whether they were given as text)."""
    if "content" in args:
        try:
            return args["content"].encode("utf-8"), True
        except UnicodeEncodeError:  # a lone surrogate: not text
            raise InvalidContent("content is not valid Unicode text") from None
    try:
        return base64.b64decode(args["content_base64"], validate=True), False
    except (binascii.Error, ValueError):
        raise InvalidContent("content_base64 is not valid base64") from None


def service(pool: asyncpg.Pool, settings: FileSettings | None = None) -> Service:
    """The file service, bound to one pool; limits from TOOLPROXY_FILE_* unless given."""
    limits = settings or FileSettings()
    entries = manifests.build(limits)

    async def list_(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        prefix = normalize_prefix(args.get("prefix", ""))
        after = normalize(args["after"]) if "after" in args else ""
        limit = int(args.get("limit", manifests.LIST_DEFAULT))
        rows = await list_files(pool, team, prefix, after, limit + 1)
        files = [_entry(r) for r in rows[:limit]]
        out: dict[str, Any] = {"files": files, "count": len(files), "truncated": len(rows) > limit}
        if out["truncated"]:
            out["next_after"] = files[-1]["path"]
        return ToolResult(output=out, object_refs=[_ref(f["path"]) for f in files])

    async def read(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        path = normalize(args["path"])
        # Confidential outputs are never kept: no artifact for such a call, only the excerpt.
        keep = None if ctx.confidential or not ctx.call_id else uuid.UUID(ctx.call_id)
        artifact_id = uuid.uuid4()
        row = await read_file(pool, team, path, limits.inline_bytes + 1, artifact_id, keep)
        if row is None:
            raise not_found("file", path)
        whole = row["size"] <= limits.inline_bytes
        artifact: dict[str, Any] | None = None
        if row["copied"]:
            artifact = {"artifact_id": str(artifact_id), "kind": "file", "path": path,
                        "media_type": row["media_type"], "bytes": row["size"],
                        "sha256": row["sha256"], "href": f"/v1/artifacts/{artifact_id}"}
        head: bytes = row["head"] if whole else row["head"][: limits.excerpt_bytes]
        text = utf8_prefix(head) if is_textual(row["media_type"]) else None
        if whole and text is not None and len(text.encode()) != len(head):
            text = None  # a "text" file that is not whole UTF-8: hand out its bytes
        encoding = "utf-8" if text is not None else "base64"
        body = text if text is not None else base64.b64encode(head).decode()
        out = {"path": path, "size": row["size"], "sha256": row["sha256"],
               "media_type": row["media_type"], "encoding": encoding, "truncated": not whole,
               "tags": list(row["tags"]), "updated_at": iso(row["updated_at"])}
        out["content" if whole else "excerpt"] = body
        if artifact is not None:
            out["artifact_id"] = artifact["artifact_id"]
        return ToolResult(output=out, object_refs=[_ref(path)],
                          artifacts=[artifact] if artifact else [])

    async def write(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team, agent = team_of(ctx), agent_of(ctx)
        path = normalize(args["path"])
        data, as_text = _content(args)
        if len(data) > limits.max_bytes:
            raise FileTooLarge(f"the file is {len(data)} bytes; a file is at most "
                               f"{limits.max_bytes}")
        blob = Blob(path=path, data=data, sha256=hashlib.sha256(data).hexdigest(),
                    media_type=media_type_for(path, args.get("media_type"), text=as_text),
                    tags=sorted(args.get("tags", [])))
        created = await write_file(pool, team, agent, blob, limits)
        return ToolResult(
            output={"path": path, "size": len(data), "sha256": blob.sha256,
                    "media_type": blob.media_type, "created": created},
            object_refs=[_ref(path)])

    async def delete(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        team = team_of(ctx)
        path = normalize(args["path"])
        if not await delete_file(pool, team, path):
            raise not_found("file", path)
        return ToolResult(output={"path": path, "deleted": True}, object_refs=[_ref(path)])

    return Service(name="files", tools=[
        ToolDef(entries["file.list"], list_),
        ToolDef(entries["file.read"], read),
        ToolDef(entries["file.write"], write),
        ToolDef(entries["file.delete"], delete),
    ])
