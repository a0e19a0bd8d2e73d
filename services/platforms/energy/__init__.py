"""Category D `energy.meter.read`: EnergyUnion meter readings (contract `tool.energy.meter.read`)."""
