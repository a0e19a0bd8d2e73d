"""Wakes open inboxes when an approval of their team changes (a trigger NOTIFYs at commit,
from whichever replica or command made the change), on the replica's shared listener."""

from __future__ import annotations

import asyncio
import contextlib

from pdp.listener import Listener

CHANNEL = "toolproxy_approvals"
EVERY_TEAM = "*"  # admins' inboxes: woken by every team's changes


class ApprovalHub:
    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._events: dict[str, asyncio.Event] = {}
        self.streams = 0  # open inbox streams on this replica (bounded by the route)

    async def start(self) -> None:
        await self._listener.subscribe(CHANNEL, self._wake, on_reconnect=self._wake_all)

    def ticket(self, team_id: str | None) -> asyncio.Event:
        """Take it before reading the inbox: a change committed while reading still wakes
        the reader (the event is already set when it waits)."""
        return self._events.setdefault(team_id or EVERY_TEAM, asyncio.Event())

    @staticmethod
    async def wait(ticket: asyncio.Event, timeout: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ticket.wait(), timeout)

    def _wake(self, team_id: str) -> None:
        for key in (team_id, EVERY_TEAM):
            ev = self._events.pop(key, None)
            if ev is not None:
                ev.set()  # every reader holding it wakes; the next ticket is a fresh event

    def _wake_all(self) -> None:
        for key in list(self._events):
            self._events.pop(key).set()
