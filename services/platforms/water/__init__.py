"""Category D Water Union: `water.usage.read` (a meter's litres) and `water.valve.set` (open or
close one of the team's valves; the policy keeps it from agents, like GREENFOOD's set_price)."""
