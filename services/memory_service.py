"""The `memory` tool (category A): a short, deterministic extractive summary of a text."""

from __future__ import annotations

from typing import Any

from services.memory_summary import (
    DEFAULT_SENTENCES,
    MAX_SENTENCES,
    MAX_TEXT_CHARS,
    SummaryError,
    summarize,
)
from services.sdk import CallContext, Cost, Service, ToolError, tool

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
        "max_sentences": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SENTENCES,
            "default": DEFAULT_SENTENCES,
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "The chosen sentences joined by spaces."},
        "sentences": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": MAX_SENTENCES,
            "description": "The chosen sentences, in their original order.",
        },
        "sentence_count": {
            "type": "integer",
            "minimum": 0,
            "description": "How many sentences the whole text has.",
        },
    },
    "required": ["summary", "sentences", "sentence_count"],
    "additionalProperties": False,
}

def run(args: dict[str, Any]) -> dict[str, Any]:
    summary = summarize(args["text"], args.get("max_sentences", DEFAULT_SENTENCES))
    return {
        "summary": summary.text,
        "sentences": summary.sentences,
        "sentence_count": summary.sentence_count,
    }


@tool(
    tool_id="memory",
    version="1.0.0",
    category="A",
    action="read",
    description=(
        "Summarize a text extractively: split it into sentences, score them by the frequency of "
        "their content words (stopwords ignored) and return the top max_sentences in original "
        "order. Deterministic; no model involved."
    ),
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    cost=Cost(per_call=0.00002),
    network=False,
)
async def memory_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        # Up to 100k characters of regex splitting and counting: off the event loop (in the
        # service's worker process, so it never holds the GIL other tools need).
        return await ctx.run_cpu(run, args)  # type: ignore[no-any-return]
    except SummaryError as exc:
        raise ToolError(str(exc)) from None


def service() -> Service:
    # CPU-bound work in one worker process: a team has one call in it at a time (more would only
    # queue there, ahead of other teams'), three teams at once.
    return Service(name="memory", tools=[memory_tool], max_concurrency=3, per_team_concurrency=1,
                   cpu_workers=1)
