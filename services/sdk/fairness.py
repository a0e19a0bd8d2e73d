"""A service's concurrency shared between teams: each team runs at most its share of the
service's slots and queues a bounded number of calls, so one team never fills a service and
another team's call still finds a free slot."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import TracebackType


@dataclass(slots=True)
class _Team:
    slots: asyncio.Semaphore
    admitted: int = 0  # running + waiting
    active: int = 0  # running


@dataclass
class TeamSlots:
    """`capacity` slots in all; a team holds at most `per_team` of them and has at most
    `queued_per_team` more calls waiting (beyond that, `admit` says no: the call is busy)."""

    capacity: int
    per_team: int
    queued_per_team: int
    _total: asyncio.Semaphore = field(init=False)
    _teams: dict[str, _Team] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.per_team <= self.capacity or self.queued_per_team < 0:
            raise ValueError("need 1 <= per_team <= capacity and queued_per_team >= 0")
        self._total = asyncio.Semaphore(self.capacity)

    def admit(self, team: str) -> bool:
        """Count a call in for its team (synchronously, before any waiting); False: busy."""
        t = self._teams.get(team)
        if t is None:
            t = self._teams[team] = _Team(asyncio.Semaphore(self.per_team))
        if t.admitted >= self.per_team + self.queued_per_team:
            return False
        t.admitted += 1
        return True

    def slot(self, team: str, timeout: float | None = None) -> _Slot:
        """`async with slots.slot(team)`: holds one of the team's slots and one of the service's
        for the body (after `admit`). Raises TimeoutError when none is free within `timeout`: the
        call leaves without running. (A class rather than an async generator: entered on every
        call, it costs about half as much.)"""
        return _Slot(self, team, timeout)

    def _leave(self, team: str, t: _Team) -> None:
        t.admitted -= 1
        if t.admitted == 0:
            del self._teams[team]

    async def _take(self, t: _Team) -> None:
        await t.slots.acquire()
        try:
            await self._total.acquire()
        except BaseException:
            t.slots.release()
            raise

    def running(self, team: str) -> int:
        t = self._teams.get(team)
        return 0 if t is None else t.active

    @property
    def teams(self) -> int:
        return len(self._teams)


class _Slot:
    __slots__ = ("_owner", "_team", "_timeout", "_t")

    def __init__(self, owner: TeamSlots, team: str, timeout: float | None) -> None:
        self._owner, self._team, self._timeout = owner, team, timeout
        self._t: _Team | None = None

    async def __aenter__(self) -> None:
        owner = self._owner
        t = owner._teams[self._team]
        try:
            if t.slots.locked() or owner._total.locked():
                async with asyncio.timeout(self._timeout):
                    await owner._take(t)
            else:
                await owner._take(t)  # both free: taken without waiting, no timer to arm
        except BaseException:
            owner._leave(self._team, t)
            raise
        t.active += 1
        self._t = t

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        t, self._t = self._t, None
        if t is None:
            return
        owner = self._owner
        t.active -= 1
        owner._total.release()
        t.slots.release()
        owner._leave(self._team, t)
