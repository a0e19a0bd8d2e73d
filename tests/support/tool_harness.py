"""Run one tool call through the real SDK path (parse, validate args, handler, reply), no NATS."""

from __future__ import annotations

from typing import Any

import orjson

from services.sdk import CallContext, Service
from services.sdk.service import ToolDef


async def run_tool(tool_def: ToolDef, args: Any, ctx: CallContext) -> dict[str, Any]:
    """The reply dict `Service._run` builds for these args: what the service would send back."""
    service = Service(name="harness", tools=[tool_def])
    return await service._run(tool_def, orjson.dumps({"args": args}), ctx)
