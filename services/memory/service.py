"""The `memory` tool (category A): a short, deterministic extractive summary of a text."""

from __future__ import annotations

from typing import Any

from services.memory import ops
from services.memory.manifests import MANIFEST
from services.memory.ops import SummaryError
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef


async def _memory(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        # Up to 100k characters of regex splitting and counting: off the event loop (in the
        # service's worker process, so it never holds the GIL other tools need).
        return await ctx.run_cpu(ops.answer, args)  # type: ignore[no-any-return]
    except SummaryError as exc:
        raise ToolError(str(exc)) from None


memory_tool = ToolDef(manifest=MANIFEST, handler=_memory, cpu_module=ops.__name__)


def service() -> Service:
    # CPU-bound work in one worker process: a team has one call in it at a time (more would only
    # queue there, ahead of other teams'), three teams at once.
    return Service(name="memory", tools=[memory_tool], max_concurrency=3, per_team_concurrency=1,
                   cpu_workers=1)
