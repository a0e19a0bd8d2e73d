"""A bounded decision cache keyed by the exact input document and the policy revision.

Exact keys make it correct for any deterministic policy: grants, arguments and context are all
in the input, so any change is a different key, and a new policy revision empties it. The TTL
(TOOLPROXY_PDP_CACHE_TTL_S, 5 s by default) bounds staleness for policies that read the clock
(e.g. business hours), and how long a cached allow outlives a PDP that died (identical inputs
only); set it to 0 to disable caching entirely.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import orjson


class DecisionCache:
    def __init__(self, *, max_entries: int = 10_000, ttl_s: float = 5.0) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries: OrderedDict[bytes, tuple[float, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0 and self.max_entries > 0

    @staticmethod
    def key(revision: str, doc: dict[str, Any]) -> bytes:
        return revision.encode() + b"\0" + orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)

    def get(self, key: bytes) -> Any | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(self, key: bytes, raw: Any) -> None:
        self._entries[key] = (time.monotonic() + self.ttl_s, raw)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
