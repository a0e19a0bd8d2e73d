"""The catalog entries of water.usage.read and water.valve.set."""

from __future__ import annotations

from services.platforms.meters import ID, readings_input, readings_output
from services.sdk import Cost
from services.sdk.service import make_manifest

USAGE = make_manifest({
    "tool_id": "water.usage.read",
    "version": "1.0.0",
    "category": "D",
    "action": "read",
    "description": "Water Union: a water meter of your team. {meter_id} gives the latest reading; "
    "{meter_id, from, to?} the readings in that range (at most 31 days), in litres per interval.",
    "input_schema": readings_input("Water Union meter reading"),
    "output_schema": readings_output("liters"),
    "cost": Cost(per_call=0.001),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})

VALVE = make_manifest({
    "tool_id": "water.valve.set",
    "version": "1.0.0",
    "category": "D",
    "action": "write",
    "description": "Water Union: open or close one of your team's valves (operators only).",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["valve_id", "open"],
        "properties": {"valve_id": ID, "open": {"type": "boolean"}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["valve_id", "open", "changed"],
        "properties": {"valve_id": {"type": "string"}, "open": {"type": "boolean"},
                       "changed": {"type": "boolean"}},
    },
    "cost": Cost(per_call=0.01),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})

MANIFESTS = (USAGE, VALVE)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
