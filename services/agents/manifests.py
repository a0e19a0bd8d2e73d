"""The catalog entry of agent.invoke."""

from __future__ import annotations

from services.agents.protocol import AGENT_ID_PATTERN, INVOCATION_ID_PATTERN
from services.agents.schemas import VALUE_DEFS
from services.sdk import Cost
from services.sdk.service import make_manifest

MANIFEST = make_manifest(
    {
        "tool_id": "agent.invoke",
        "version": "1.0.0",
        "category": "C",
        "action": "write",
        "description": (
            "Invoke another registered agent of your team with an input matching its input "
            "schema; returns its output. The agent acts with its own rights, never yours. "
            "An agent invoked this way passes its invocation_id to invoke further agents "
            "(depth limit and cycles checked)."
        ),
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["agent_id", "input"],
            "$defs": VALUE_DEFS,
            "properties": {
                "agent_id": {"type": "string", "maxLength": 64, "pattern": AGENT_ID_PATTERN},
                "input": {"$ref": "#/$defs/object"},
                "invocation_id": {"type": "string", "maxLength": 32, "pattern": INVOCATION_ID_PATTERN,
                                  "description": "the invocation you are serving, if any"},
            },
        },
        "output_schema": {
            "type": "object",
            "required": ["agent_id", "output", "invocation_id", "depth"],
            "$defs": VALUE_DEFS,
            "properties": {
                "agent_id": {"type": "string"},
                "output": {"$ref": "#/$defs/object"},
                "invocation_id": {"type": "string"},
                "depth": {"type": "integer", "minimum": 1},
            },
        },
        # The callee's reported cost (1T) arrives as compute units: charged to the caller.
        "cost": Cost(per_call=0.001, per_compute_unit=1.0),
        "network": False,
        "timeout_ms": 5_000,
    }
)

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
