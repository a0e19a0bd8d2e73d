"""An upstream's circuit breaker: after failures in a row it opens, calls fail at once, and
one trial goes through after a while (shared by MCP links and OpenAPI services)."""

from __future__ import annotations

import time


class Breaker:
    """Opens after `failures` in a row; while open, calls fail at once; one trial after `open_s`."""

    def __init__(self, failures: int, open_s: float) -> None:
        self._limit, self._open_s = failures, open_s
        self._count, self._until = 0, 0.0

    @property
    def open(self) -> bool:
        return self._count >= self._limit and time.monotonic() < self._until

    def success(self) -> None:
        self._count = 0

    def failure(self) -> None:
        self._count += 1
        if self._count >= self._limit:
            self._until = time.monotonic() + self._open_s
