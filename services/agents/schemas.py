"""Schemas of agent inputs and outputs: a registered agent's input schema must bound what it
accepts, and every value crossing agent.invoke is a bounded JSON value without NUL
characters or integers beyond 64 bits (it is stored with the call, in Postgres)."""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MAX_SCHEMA_BYTES = 16_384
MAX_STRING = 100_000
MAX_ITEMS = 10_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

NO_NUL = "^[^\\x00]*$"

# Any JSON value, bounded and NUL-free, to any depth (the body size bounds the depth).
VALUE_DEFS: dict[str, Any] = {
    "value": {
        "anyOf": [
            {"type": "string", "maxLength": 32_000, "pattern": NO_NUL},
            {"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array", "maxItems": 256, "items": {"$ref": "#/$defs/value"}},
            {"$ref": "#/$defs/object"},
        ]
    },
    "object": {
        "type": "object",
        "maxProperties": 256,
        "propertyNames": {"maxLength": 256, "pattern": NO_NUL},
        "additionalProperties": {"$ref": "#/$defs/value"},
    },
}

OBJECT_VALUE_SCHEMA: dict[str, Any] = {"$defs": VALUE_DEFS, "$ref": "#/$defs/object"}

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedProperties", "unevaluatedItems")


def input_schema_problem(schema: Any) -> str | None:
    """Why a registered agent's input schema is refused (None when it is accepted): a valid
    Draft 2020-12 schema of an object, at most 16 KiB, whose every string has a maxLength,
    every array a maxItems and every object additionalProperties false (or a bounded
    schema and maxProperties)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "the input schema must describe a JSON object"
    if len(orjson.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"the input schema exceeds {MAX_SCHEMA_BYTES} bytes"
    try:
        Draft202012Validator.check_schema(schema)
        return _unbounded(schema, "#")
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message[:200]}"
    except RecursionError:
        return "the input schema is nested too deeply"


def _unbounded(node: Any, where: str) -> str | None:
    if node is True or node == {}:
        return f"{where} accepts any value: bound it"
    if not isinstance(node, dict):
        return None
    types = node.get("type")
    kinds = set(types) if isinstance(types, list) else {types} if isinstance(types, str) else set()
    if "string" in kinds and not _bounded(node.get("maxLength"), MAX_STRING):
        return f"{where}: a string needs a maxLength of at most {MAX_STRING}"
    if "array" in kinds and not _bounded(node.get("maxItems"), MAX_ITEMS):
        return f"{where}: an array needs a maxItems of at most {MAX_ITEMS}"
    if "object" in kinds:
        extra = node.get("additionalProperties", True)
        if extra is not False and not (isinstance(extra, dict) and extra
                                       and _bounded(node.get("maxProperties"), MAX_ITEMS)):
            return f"{where}: an object needs additionalProperties false (or a schema and maxProperties)"
    for key in _SUBSCHEMA_LISTS:
        for i, sub in enumerate(node.get(key) or []):
            if (problem := _unbounded(sub, f"{where}/{key}/{i}")) is not None:
                return problem
    for key in _SUBSCHEMA_MAPS:
        for name, sub in (node.get(key) or {}).items():
            if (problem := _unbounded(sub, f"{where}/{key}/{name}")) is not None:
                return problem
    for key in _SUBSCHEMAS:
        sub = node.get(key)
        if isinstance(sub, dict) and (problem := _unbounded(sub, f"{where}/{key}")) is not None:
            return problem
    return None


def _bounded(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most
