"""The DAARION platforms (category D): GREENFOOD orders, EnergyUnion meters, Water Union meters
and valves — three services on one small platform-service module (`platform`)."""
