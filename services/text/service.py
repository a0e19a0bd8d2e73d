"""The `text` tool (category A): case, trim, truncate, slugify, counts and bounded regex search."""

from __future__ import annotations

import asyncio
from typing import Any

from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef
from services.text import ops
from services.text.manifests import MANIFEST


def run(args: dict[str, Any]) -> dict[str, Any]:
    """Apply one op to already validated args."""
    op, text = args["op"], args["text"]
    if op in ("upper", "lower", "title", "trim", "slugify"):
        return {"text": getattr(ops, op)(text)}
    if op == "truncate":
        cut, truncated = ops.truncate(
            text, args["max_length"], args.get("ellipsis", ops.DEFAULT_ELLIPSIS)
        )
        return {"text": cut, "truncated": truncated}
    if op == "word_count":
        return {"count": ops.word_count(text)}
    if op == "char_count":
        return {"count": ops.char_count(text)}
    if op == "regex_find":
        return ops.regex_find(
            text,
            args["pattern"],
            args.get("flags", []),
            args.get("max_matches", ops.DEFAULT_MATCHES),
        )
    raise ToolError(f"unknown op {op!r}")


async def _text(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        if args["op"] == "regex_find":
            # Matching may run for up to its timeout: keep the event loop free meanwhile.
            return await asyncio.to_thread(run, args)
        return run(args)
    except ops.TextError as exc:
        raise ToolError(str(exc)) from None


text_tool = ToolDef(manifest=MANIFEST, handler=_text)


def service() -> Service:
    # regex_find runs in a thread for up to its timeout: a team holds at most 4 of 16 slots.
    return Service(name="text", tools=[text_tool], max_concurrency=16)
