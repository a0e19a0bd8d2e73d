"""The catalog entry of router.route."""

from __future__ import annotations

from services.sdk import Cost
from services.sdk.service import make_manifest

TASK_LABEL = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z0-9_-]*$",
              "description": "a task label the routing rules know (e.g. code, pii, summarize)"}

MANIFEST = make_manifest(
    {
        "tool_id": "router.route",
        "version": "1.0.0",
        "category": "C",
        "action": "read",
        "description": (
            "Pick the model (or one of your team's registered agents) for a request by the "
            "routing rules: your team, the task label, the data's risk, a cost ceiling. "
            "Returns the target and the reasons."
        ),
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "task": TASK_LABEL,
                "prompt": {"type": "string", "maxLength": 128_000, "pattern": "^[^\\x00]*$",
                           "description": "the request's text (only its size is used: cost)"},
                "cost_ceiling_1t": {"type": "number", "minimum": 0, "maximum": 1_000_000,
                                    "description": "the most one call may cost, in 1T"},
            },
        },
        "output_schema": {
            "type": "object",
            "required": ["target", "reasons", "policy_revision"],
            "properties": {
                "target": {
                    "type": "object",
                    "required": ["kind", "id"],
                    "properties": {"kind": {"enum": ["model", "agent"]}, "id": {"type": "string"}},
                },
                "reasons": {"type": "array", "items": {"type": "string"}},
                "policy_revision": {"type": "string"},
            },
        },
        "cost": Cost(per_call=0.00001),
        "network": False,
        "timeout_ms": 2_000,
    }
)

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
