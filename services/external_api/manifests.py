"""The catalog entry of external_api.call. The body is free JSON, so it is bounded structurally
instead: depth (6 levels), strings, arrays, object sizes and 64-bit numbers."""

from __future__ import annotations

from typing import Any

from services.external_api.paths import MAX_PATH_LENGTH, MAX_QUERY_LENGTH
from services.external_api.store import METHODS, NAME_PATTERN
from services.sdk import Cost
from services.sdk.service import make_manifest

BODY_DEPTH = 6
MAX_STRING = 65_536
MAX_ITEMS = 1_000
MAX_PROPERTIES = 100
INT64 = 2**63


def _level(depth: int) -> dict[str, Any]:
    scalars: list[dict[str, Any]] = [
        {"type": "string", "maxLength": MAX_STRING},
        {"type": "number", "minimum": -INT64, "maximum": INT64 - 1},
        {"type": "boolean"},
        {"type": "null"},
    ]
    if depth == 0:
        return {"anyOf": scalars}
    inner = {"$ref": f"#/$defs/json{depth - 1}"}
    return {"anyOf": [*scalars, *_containers(inner)]}


def _containers(inner: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "array", "maxItems": MAX_ITEMS, "items": inner},
        {"type": "object", "maxProperties": MAX_PROPERTIES,
         "propertyNames": {"maxLength": 256}, "additionalProperties": inner},
    ]


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["api", "method", "path"],
    "properties": {
        "api": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 64,
                "description": "the registered API's name"},
        "method": {"type": "string", "enum": list(METHODS), "maxLength": 6},
        "path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_LENGTH + 1 + MAX_QUERY_LENGTH,
                 "description": "below the API's base URL, e.g. /v1/items/42?expand=owner"},
        "body": {"anyOf": _containers({"$ref": f"#/$defs/json{BODY_DEPTH - 1}"}),
                 "description": "a JSON object or array (POST, PUT, PATCH)"},
    },
    "$defs": {f"json{d}": _level(d) for d in range(BODY_DEPTH)},
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["api", "method", "path", "status", "content_type", "body", "truncated"],
    "properties": {
        "api": {"type": "string"},
        "method": {"type": "string"},
        "path": {"type": "string"},
        "status": {"type": "integer"},
        "content_type": {"type": "string"},
        "body": {"description": "the answer: parsed JSON, or its text"},
        "truncated": {"type": "boolean"},
    },
}


MANIFEST = make_manifest(
    {
        "tool_id": "external_api.call",
        "version": "1.0.0",
        "category": "D",
        "action": "write",
        "description": "Call an external API an admin registered: its name, an allowed method, a "
        "path matching its registered patterns, an optional JSON body. The API's credential is "
        "added by the proxy and never shown. Each call waits for a governance approval.",
        "input_schema": INPUT_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "cost": Cost(per_call=0.005),
        "network": True,
        "requires_approval": True,
        "timeout_ms": 10_000,
    }
)

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
