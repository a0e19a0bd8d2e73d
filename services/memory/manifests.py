"""The catalog entry of `memory`."""

from __future__ import annotations

from typing import Any

from services.memory.ops import DEFAULT_SENTENCES, MAX_SENTENCES, MAX_TEXT_CHARS
from services.sdk import Cost
from services.sdk.service import make_manifest

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


MANIFEST = make_manifest({
    "tool_id": "memory",
    "version": "1.0.0",
    "category": "A",
    "action": "read",
    "description": (
        "Summarize a text extractively: split it into sentences, score them by the frequency of "
        "their content words (stopwords ignored) and return the top max_sentences in original "
        "order. Deterministic; no model involved."
    ),
    "input_schema": INPUT_SCHEMA,
    "output_schema": OUTPUT_SCHEMA,
    "cost": Cost(per_call=0.00002),
    "network": False,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
