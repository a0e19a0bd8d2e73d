"""The catalog entry of energy.meter.read."""

from __future__ import annotations

from services.platforms.meters import readings_input, readings_output
from services.sdk import Cost
from services.sdk.service import make_manifest

MANIFEST = make_manifest({
    "tool_id": "energy.meter.read",
    "version": "1.0.0",
    "category": "D",
    "action": "read",
    "description": "EnergyUnion: a meter of your team. {meter_id} gives the latest reading; "
    "{meter_id, from, to?} the readings in that range (at most 31 days), in kWh per interval.",
    "input_schema": readings_input("EnergyUnion meter reading"),
    "output_schema": readings_output("kwh"),
    "cost": Cost(per_call=0.001),
    "network": False,
    "requires_approval": True,
    "timeout_ms": 5_000,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
