"""The catalog entry of `embeddings`."""

from __future__ import annotations

from typing import Any

from services.embeddings.ops import DIMENSIONS, MAX_TEXT_CHARS, MAX_TEXTS, MAX_TOTAL_CHARS, MODEL
from services.sdk import Cost
from services.sdk.service import make_manifest

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


MANIFEST = make_manifest({
    "tool_id": "embeddings",
    "version": "1.0.0",
    "category": "A",
    "action": "read",
    "description": (
        f"Embed texts as {DIMENSIONS}-dimensional unit vectors ({MODEL}: deterministic feature "
        "hashing of lowercased words and character trigrams). Texts sharing words score a "
        "higher cosine similarity; no semantic model, no network."
    ),
    "input_schema": INPUT_SCHEMA,
    "output_schema": OUTPUT_SCHEMA,
    "cost": Cost(per_call=0.00002),
    "network": False,
    # The schema bounds each text, the handler their total: 100,000 characters at most 6 bytes
    # of JSON each, plus the array's punctuation.
    "max_args_bytes": 6 * MAX_TOTAL_CHARS + 3 * MAX_TEXTS + 32,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
