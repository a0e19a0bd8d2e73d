"""The `embeddings` tool (category A): deterministic feature-hashing embeddings of texts."""

from __future__ import annotations

from typing import Any

from services.embedding_hash import (
    DIMENSIONS,
    MAX_TEXT_CHARS,
    MAX_TEXTS,
    MAX_TOTAL_CHARS,
    MODEL,
    EmbeddingError,
    embed_many,
)
from services.sdk import CallContext, Cost, Service, ToolError, tool

_TEXT: dict[str, Any] = {"type": "string", "maxLength": MAX_TEXT_CHARS}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": _TEXT,
        "texts": {"type": "array", "items": _TEXT, "minItems": 1, "maxItems": MAX_TEXTS},
    },
    # Exactly one of the two (no combinator, so plain JSON Schema consumers understand it too).
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
    "description": (
        f"Either text or texts (at most {MAX_TEXTS}, {MAX_TOTAL_CHARS} characters in total)."
    ),
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"const": MODEL},
        "dimensions": {"const": DIMENSIONS},
        "embeddings": {
            "type": "array",
            "maxItems": MAX_TEXTS,
            "items": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": DIMENSIONS,
                "maxItems": DIMENSIONS,
            },
            "description": "One L2-normalized vector per input text, in input order.",
        },
    },
    "required": ["model", "dimensions", "embeddings"],
    "additionalProperties": False,
}

def run(args: dict[str, Any]) -> dict[str, Any]:
    texts = [args["text"]] if "text" in args else args["texts"]
    return {"model": MODEL, "dimensions": DIMENSIONS, "embeddings": embed_many(texts)}


@tool(
    tool_id="embeddings",
    version="1.0.0",
    category="A",
    action="read",
    description=(
        f"Embed texts as {DIMENSIONS}-dimensional unit vectors ({MODEL}: deterministic feature "
        "hashing of lowercased words and character trigrams). Texts sharing words score a "
        "higher cosine similarity; no semantic model, no network."
    ),
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    cost=Cost(per_call=0.00002),
    network=False,
    # The schema bounds each text, the handler their total: 100,000 characters at most 6 bytes
    # of JSON each, plus the array's punctuation.
    max_args_bytes=6 * MAX_TOTAL_CHARS + 3 * MAX_TEXTS + 32,
)
async def embeddings_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        return await ctx.run_cpu(run, args)  # type: ignore[no-any-return]
    except EmbeddingError as exc:
        raise ToolError(str(exc)) from None


def service() -> Service:
    # CPU-bound work in one worker process: one call per team in it at a time, three teams.
    return Service(name="embeddings", tools=[embeddings_tool], max_concurrency=3,
                   per_team_concurrency=1, cpu_workers=1)
