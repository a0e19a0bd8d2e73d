"""Per worker, per team: at most N of a team's large requests in progress at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class TeamGate:
    def __init__(self, per_team: int) -> None:
        self.per_team = per_team
        self._teams: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, team: str) -> AsyncIterator[None]:
        entry = self._teams.get(team)
        if entry is None:
            entry = self._teams[team] = (asyncio.Semaphore(self.per_team), [0])
        sem, users = entry
        users[0] += 1
        try:
            async with sem:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._teams[team]

    @property
    def teams(self) -> int:
        return len(self._teams)
