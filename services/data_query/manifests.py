"""The catalog entry of data.query: one input schema, each named query with its params."""

from __future__ import annotations

from services.data_query.store import QUERIES
from services.sdk import Cost
from services.sdk.service import make_manifest

ROW_LIMIT_DEFAULT = 100
ROW_LIMIT_MAX = 500

_NAMES = sorted(QUERIES)

MANIFEST = make_manifest(
    {
        "tool_id": "data.query",
        "version": "1.0.0",
        "category": "C",
        "action": "read",
        "description": "Run a named read-only query over your team's data: "
        + "; ".join(f"{q.name} ({q.description})" for q in QUERIES.values())
        + ".",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "enum": _NAMES},
                # Each query's own schema (below) says exactly which params it takes; this one
                # bounds what any of them may hold.
                "params": {"type": "object", "maxProperties": 16,
                           "propertyNames": {"maxLength": 64},
                           "additionalProperties": {"anyOf": [{"type": "string", "maxLength": 256},
                                                              {"type": "number"}, {"type": "boolean"},
                                                              {"type": "null"}]}},
                "limit": {"type": "integer", "minimum": 1, "maximum": ROW_LIMIT_MAX},
            },
            # Each query's params schema: the proxy and the SDK reject bad params before the
            # handler runs, so the handler only checks what a schema cannot (a real date).
            "allOf": [
                {
                    "if": {"required": ["query"], "properties": {"query": {"const": q.name}}},
                    "then": {
                        "properties": {"params": q.params_schema},
                        "required": ["params"] if q.params_schema.get("required") else [],
                    },
                }
                for q in QUERIES.values()
            ],
        },
        "output_schema": {
            "type": "object",
            "required": ["rows", "row_count", "truncated"],
            "properties": {
                "rows": {"type": "array", "items": {"type": "object"}},
                "row_count": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
            },
        },
        "cost": Cost(per_call=0.001),
        "network": False,
        "timeout_ms": 3_000,
    }
)

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
