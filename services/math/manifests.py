"""The catalog entry of `math`."""

from __future__ import annotations

from typing import Any

from services.math.ops import CONSTANTS, FUNCTIONS, MAX_EXPR_CHARS
from services.sdk import Cost
from services.sdk.service import make_manifest

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expr": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_EXPR_CHARS,
            "description": (
                "An arithmetic expression: numbers, + - * / // % ** (|exponent| <= 1000), "
                f"parentheses, the constants {', '.join(CONSTANTS)} and the functions "
                f"{', '.join(FUNCTIONS)}. At most 200 terms; integers up to 1000 digits."
            ),
        },
    },
    "required": ["expr"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # Two branches, not "number": clients that build a model from this schema (fastmcp)
        # would otherwise read 14 as 14.0.
        "value": {
            "anyOf": [{"type": "integer"}, {"type": "number"}],
            "description": "An integer when the result is an exact integer, else a float.",
        },
        "exact": {
            "type": "string",
            "description": "All digits of an integer result beyond the 64-bit range.",
        },
    },
    "required": ["value"],
    "additionalProperties": False,
}


MANIFEST = make_manifest({
    "tool_id": "math",
    "version": "1.0.0",
    "category": "A",
    "action": "read",
    "description": (
        "Evaluate an arithmetic expression safely (no code execution), e.g. "
        '{"expr": "2+3*4"} -> {"value": 14}.'
    ),
    "input_schema": INPUT_SCHEMA,
    "output_schema": OUTPUT_SCHEMA,
    "cost": Cost(per_call=0.00002),
    "network": False,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
