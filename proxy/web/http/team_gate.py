"""Per worker, per team: a team's large requests paced to a byte rate and a few at a time.

Pacing is a virtual clock per team (GCRA): each request of S bytes moves the team's clock
S / rate seconds on; a request waits (unread) while the clock is more than a second ahead of
now. A team alone is never slowed below the rate; many large requests at once take turns."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

_BURST_S = 1.0
_PRUNE_ABOVE = 1024


@dataclass(slots=True)
class _Team:
    slots: asyncio.Semaphore
    users: int = 0
    clock: float = field(default_factory=time.monotonic)


class TeamGate:
    def __init__(self, per_team: int, bytes_per_s: float) -> None:
        self.per_team = per_team
        self.bytes_per_s = bytes_per_s
        self._teams: dict[str, _Team] = {}

    def _team(self, team: str, now: float) -> _Team:
        t = self._teams.get(team)
        if t is None:
            if len(self._teams) > _PRUNE_ABOVE:
                self._prune(now)
            t = self._teams[team] = _Team(asyncio.Semaphore(self.per_team), clock=now)
        return t

    def _prune(self, now: float) -> None:
        for name in [n for n, t in self._teams.items() if t.users == 0 and t.clock <= now]:
            del self._teams[name]

    def delay(self, team: str, size: int) -> float:
        """Book `size` bytes for the team; how long the request must wait first."""
        now = time.monotonic()
        t = self._team(team, now)
        start = max(t.clock, now)
        t.clock = start + size / self.bytes_per_s
        return max(0.0, start - now - _BURST_S)

    @contextlib.asynccontextmanager
    async def hold(self, team: str, size: int) -> AsyncIterator[None]:
        wait = self.delay(team, size)
        t = self._teams[team]
        t.users += 1
        try:
            if wait > 0:
                await asyncio.sleep(wait)
            async with t.slots:
                yield
        finally:
            t.users -= 1

    @property
    def teams(self) -> int:
        return len(self._teams)
