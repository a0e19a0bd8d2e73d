"""A bounded decision cache keyed by the exact input document and the policy revision.

Keys hold the revision and every part of the input the policy reads — the policy declares
which tools' decisions read their arguments, and whether it reads the run id (pdp.reads) —, so
any change that matters is a different key, and a new policy revision empties the cache. The TTL
(TOOLPROXY_PDP_CACHE_TTL_S, 5 s by default) bounds staleness for policies that read the clock
(e.g. business hours), and how long a cached allow outlives a PDP that died (identical inputs
only); set it to 0 to disable caching entirely.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import orjson

from pdp.reads import EVERYTHING, InputReads


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
    def key(revision: str, doc: dict[str, Any], reads: InputReads = EVERYTHING) -> bytes:
        """The revision and what the policy reads: a tool's arguments only when its rules
        read them, the run id and the agent's id only when the policy does (see pdp.reads)."""
        if not reads.reads_args(doc["tool"]["tool_id"]) or not reads.agent_run_id or not reads.agent_id:
            doc = dict(doc)
            if not reads.reads_args(doc["tool"]["tool_id"]):
                doc["args"] = None
            if not reads.agent_run_id:
                doc["context"] = {k: v for k, v in doc["context"].items() if k != "agent_run_id"}
            if not reads.agent_id:
                doc["subject"] = {k: v for k, v in doc["subject"].items() if k != "agent_id"}
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
