"""Today's consumption of a team or agent, as kept in the quota KV bucket."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from pdp.data.quotas import Quota


@dataclass(slots=True)
class Counters:
    """What a team (or agent) used today, as kept in the KV."""

    invocations: int = 0
    tokens: int = 0
    compute_units: float = 0.0
    cost_1t: float = 0.0

    @classmethod
    def load(cls, raw: bytes | None) -> Counters:
        if not raw:
            return cls()
        d = orjson.loads(raw)
        return cls(int(d.get("i", 0)), int(d.get("t", 0)), float(d.get("c", 0.0)), float(d.get("k", 0.0)))

    def dump(self) -> bytes:
        return orjson.dumps({"i": self.invocations, "t": self.tokens, "c": self.compute_units,
                             "k": self.cost_1t})

    def exceeded(self, q: Quota) -> str | None:
        """The first exhausted limit, if any (checked before admitting one more invocation)."""
        if q.invocations is not None and self.invocations >= q.invocations:
            return "invocations"
        if q.tokens is not None and self.tokens >= q.tokens:
            return "tokens"
        if q.compute_units is not None and self.compute_units >= q.compute_units:
            return "compute_units"
        if q.cost_1t is not None and self.cost_1t >= q.cost_1t:
            return "cost_1t"
        return None
