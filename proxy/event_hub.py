"""Wakes event streams when their team has new events (the journal writer NOTIFYs after each
batch, from whichever replica); one condition per team, on the replica's shared listener."""

from __future__ import annotations

import asyncio
import contextlib

from pdp.listener import Listener
from proxy.events import CHANNEL


class EventHub:
    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._waiters: dict[str, asyncio.Event] = {}
        self.streams = 0  # open SSE streams on this replica (bounded by the route)

    async def start(self) -> None:
        await self._listener.subscribe(CHANNEL, self._wake, on_reconnect=self._wake_all)

    async def wait(self, team_id: str, timeout: float) -> None:
        """Until the team has news, or `timeout` (streams re-check either way)."""
        ev = self._waiters.setdefault(team_id, asyncio.Event())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ev.wait(), timeout)

    def _wake(self, team_id: str) -> None:
        ev = self._waiters.pop(team_id, None)
        if ev is not None:
            ev.set()  # everyone waiting on this team wakes; the next wait gets a fresh event

    def _wake_all(self) -> None:
        for team in list(self._waiters):
            self._wake(team)
