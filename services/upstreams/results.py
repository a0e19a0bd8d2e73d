"""An upstream's CallToolResult as a tool result: structuredContent where given, else its
content blocks (text inline; images, audio and embedded resources kept as artifacts with refs),
bounded; isError becomes the tool's own error."""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from typing import Any

import asyncpg
import mcp_types as types
import orjson

from services.sdk.service import CallContext, ToolResult
from services.upstreams.errors import UpstreamError, UpstreamToolError

MAX_BLOCKS = 100
MAX_TEXT = 1 << 20  # one text block's characters kept inline


async def to_result(result: types.CallToolResult, ctx: CallContext, pool: asyncpg.Pool, *,
                    upstream: str, tool: str, max_bytes: int) -> ToolResult:
    blocks = list(result.content or [])[:MAX_BLOCKS]
    if result.is_error:
        text = " ".join(b.text for b in blocks if isinstance(b, types.TextContent))
        raise UpstreamToolError(text[:1000] or f"{upstream}'s {tool} reported an error")
    provenance = [{"type": "upstream", "upstream": upstream, "tool": tool}]
    if result.structured_content is not None:
        output = result.structured_content
        if len(orjson.dumps(output)) > max_bytes:
            raise UpstreamError(f"the structured result exceeds {max_bytes} bytes")
        return ToolResult(output=output, provenance_refs=provenance)
    content: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            content.append({"type": "text", "text": block.text[:MAX_TEXT]})
            continue
        kept = await _keep(block, ctx, pool)
        if kept is None:
            content.append({"type": getattr(block, "type", "unknown"), "omitted": True})
            continue
        artifacts.append(kept)
        content.append({"type": kept["block"], "artifact_id": kept["artifact_id"],
                        "media_type": kept["media_type"], "bytes": kept["bytes"]})
    output = {"content": content}
    if len(orjson.dumps(output)) > max_bytes:
        raise UpstreamError(f"the result exceeds {max_bytes} bytes")
    return ToolResult(output=output, artifacts=artifacts, provenance_refs=provenance)


async def _keep(block: Any, ctx: CallContext, pool: asyncpg.Pool) -> dict[str, Any] | None:
    """A binary block stored as an artifact of the call (never for a confidential call)."""
    if ctx.confidential or not ctx.call_id:
        return None
    kind = getattr(block, "type", "")
    if isinstance(block, types.ImageContent | types.AudioContent):
        data, media = _b64(block.data), block.mime_type
    elif isinstance(block, types.EmbeddedResource):
        res = block.resource
        text = getattr(res, "text", None)
        data = text.encode() if isinstance(text, str) else _b64(getattr(res, "blob", "") or "")
        media = getattr(res, "mime_type", None) or ("text/plain" if text else "application/octet-stream")
    else:
        return None
    if data is None:
        return None
    artifact_id = uuid.uuid4()
    digest = hashlib.sha256(data).hexdigest()
    await pool.execute(
        """INSERT INTO artifacts (artifact_id, team_id, call_id, kind, media_type, bytes, sha256, content)
           VALUES ($1, $2, $3, 'upstream', $4, $5, $6, $7)""",
        artifact_id, ctx.team_id, uuid.UUID(ctx.call_id), media[:128], len(data), digest, data)
    return {"artifact_id": str(artifact_id), "kind": "upstream", "block": kind,
            "media_type": media[:128], "bytes": len(data), "sha256": digest,
            "href": f"/v1/artifacts/{artifact_id}"}


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
