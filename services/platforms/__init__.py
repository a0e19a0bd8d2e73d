"""The DAARION platforms (category D): GREENFOOD orders (`greenfood/`), EnergyUnion meters
(`energy/`), Water Union meters and valves (`water/`) — a family each, one service each — and
what they share: every call one Postgres transaction (`transaction.py`), a team's meters and
their readings (`meters.py`). The demo data (meters of `team-1`, GREENFOOD's products) is
seeded by the migrations 0001 and 0061."""
