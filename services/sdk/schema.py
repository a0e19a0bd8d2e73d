"""JSON Schema fragments for tool inputs: every string bounded and free of NUL characters."""

from __future__ import annotations

from typing import Any

# Postgres text cannot hold U+0000: refused by the schema, before anything reaches a service.
NO_NUL = "^[^\\x00]*$"
NON_BLANK = "^[^\\x00]*[^\\x00\\s][^\\x00]*$"  # and at least one character that is not a space
# Canonical lowercase UUIDs, as the services hand them out.
UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
INT32_MAX = 2_147_483_647  # version columns are Postgres integers

OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": False}


def text(max_length: int, *, min_length: int = 0, non_blank: bool = False) -> dict[str, Any]:
    """A bounded string without NUL; `non_blank` also refuses one made only of whitespace."""
    schema: dict[str, Any] = {"type": "string", "maxLength": max_length, "pattern": NO_NUL}
    if min_length:
        schema["minLength"] = min_length
    if non_blank:
        schema["minLength"] = max(1, min_length)
        schema["pattern"] = NON_BLANK
    return schema


def identifier(max_length: int = 128) -> dict[str, Any]:
    """An opaque id chosen by the caller: ASCII letters, digits and `._:/-`, not starting with
    punctuation."""
    return {"type": "string", "minLength": 1, "maxLength": max_length,
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._:/-]*$"}


def uuid_string(description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 36, "maxLength": 36,
                              "pattern": UUID_PATTERN}
    if description:
        schema["description"] = description
    return schema


def version(description: str = "the version you read; a stale one is version_conflict") -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": INT32_MAX, "description": description}


def tags(max_items: int = 16) -> dict[str, Any]:
    return {"type": "array", "maxItems": max_items, "uniqueItems": True,
            "items": {"type": "string", "minLength": 1, "maxLength": 64,
                      "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]*$"}}


def limit(default: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": maximum, "default": default}
