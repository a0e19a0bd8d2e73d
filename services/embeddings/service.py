"""The `embeddings` tool (category A): deterministic feature-hashing embeddings of texts."""

from __future__ import annotations

from typing import Any

from services.embeddings import ops
from services.embeddings.manifests import MANIFEST
from services.embeddings.ops import EmbeddingError
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef


async def _embeddings(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        return await ctx.run_cpu(ops.answer, args)  # type: ignore[no-any-return]
    except EmbeddingError as exc:
        raise ToolError(str(exc)) from None


embeddings_tool = ToolDef(manifest=MANIFEST, handler=_embeddings, cpu_module=ops.__name__)


def service() -> Service:
    # CPU-bound work in one worker process: one call per team in it at a time, three teams.
    return Service(name="embeddings", tools=[embeddings_tool], max_concurrency=3,
                   per_team_concurrency=1, cpu_workers=1)
