"""The catalog entry of `text`: one input schema, each op with its own parameters."""

from __future__ import annotations

from typing import Any

from services.sdk import Cost
from services.sdk.service import make_manifest
from services.text import ops

# Parameters each op takes (besides `op` and `text`), and which of them are required.
OP_PARAMS: dict[str, tuple[set[str], set[str]]] = {
    "upper": (set(), set()),
    "lower": (set(), set()),
    "title": (set(), set()),
    "trim": (set(), set()),
    "truncate": ({"max_length", "ellipsis"}, {"max_length"}),
    "slugify": (set(), set()),
    "word_count": (set(), set()),
    "char_count": (set(), set()),
    "regex_find": ({"pattern", "flags", "max_matches"}, {"pattern"}),
}
_ALL_PARAMS = {"max_length", "ellipsis", "pattern", "flags", "max_matches"}


def _op_rules() -> list[dict[str, Any]]:
    """One if/then per op: its required params, and every other op's params forbidden."""
    rules = []
    for op, (allowed, required) in OP_PARAMS.items():
        then: dict[str, Any] = {"properties": {p: False for p in sorted(_ALL_PARAMS - allowed)}}
        if required:
            then["required"] = sorted(required)
        rules.append(
            {"if": {"properties": {"op": {"const": op}}, "required": ["op"]}, "then": then}
        )
    return rules


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op": {
            "enum": list(OP_PARAMS),
            "description": (
                "upper|lower|title|trim -> {text}; truncate (max_length, ellipsis) -> "
                "{text, truncated}; slugify -> {text}; word_count|char_count -> {count}; "
                "regex_find (pattern, flags, max_matches) -> {matches, truncated}."
            ),
        },
        "text": {"type": "string", "maxLength": ops.MAX_TEXT_CHARS},
        "max_length": {
            "type": "integer",
            "minimum": 0,
            "maximum": ops.MAX_TEXT_CHARS,
            "description": "truncate: the most code points kept, the ellipsis included.",
        },
        "ellipsis": {
            "type": "string",
            "maxLength": 16,
            "description": 'truncate: appended when text is cut; default "…".',
        },
        "pattern": {
            "type": "string",
            "minLength": 1,
            "maxLength": ops.MAX_PATTERN_CHARS,
            "description": (
                "regex_find: a regular expression (Python `regex` syntax); matching stops "
                f"with an error after {ops.REGEX_TIMEOUT_S} s."
            ),
        },
        "flags": {
            "type": "array",
            "items": {"enum": list(ops.FLAGS)},
            "maxItems": len(ops.FLAGS),
            "uniqueItems": True,
        },
        "max_matches": {
            "type": "integer",
            "minimum": 1,
            "maximum": ops.MAX_MATCHES,
            "default": ops.DEFAULT_MATCHES,
        },
    },
    "required": ["op", "text"],
    "additionalProperties": False,
    # Each op's own parameters: a rule across properties, which the proxy checks on every call
    # and the model-facing surfaces leave out of the schema they publish (not portable).
    "allOf": _op_rules(),
}

_MATCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "match": {"type": "string"},
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "groups": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    },
    "required": ["match", "start", "end", "groups"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "count": {"type": "integer", "minimum": 0},
        "matches": {"type": "array", "items": _MATCH},
        "truncated": {"type": "boolean"},
    },
    "additionalProperties": False,
}


MANIFEST = make_manifest({
    "tool_id": "text",
    "version": "1.0.0",
    "category": "A",
    "action": "read",
    "description": (
        "Text utilities: upper, lower, title, trim, truncate, slugify, word_count, char_count "
        "and regex_find (time-bounded). Lengths are in Unicode code points."
    ),
    "input_schema": INPUT_SCHEMA,
    "output_schema": OUTPUT_SCHEMA,
    "cost": Cost(per_call=0.00002),
    "network": False,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
