"""Per-team wake-ups for readers that poll Postgres (event streams, approval inboxes): a
channel whose NOTIFY payload names a team, followed on the replica's shared listener."""

from __future__ import annotations

import asyncio
import contextlib

from infra.pg_listener import Follower, Listener

EVERY_TEAM = "*"  # a reader of every team (an admin's inbox): woken by any team's change
POLL_S = 1.0  # how often a reader reads again while notifications cannot be relied on


class TeamWakeups:
    """The ticket protocol: take `ticket(team)` *before* reading, then `wait` on it. A change
    committed while the reader reads still wakes it (its ticket is already set when it
    waits). Notifications are not relied on alone: while the listener is not healthy (cut,
    silent, reconnecting) readers read again every POLL_S, and its reconnect wakes them all."""

    def __init__(self, listener: Listener, channel: str) -> None:
        self._listener = listener
        self._channel = channel
        self._tickets: dict[str, asyncio.Event] = {}
        self._follower: Follower | None = None
        self.streams = 0  # readers open on this replica (each surface bounds its own)

    async def start(self) -> None:
        # A lost listener may have missed a change: every reader reads again.
        self._follower = await self._listener.follow(self._channel, self._wake,
                                                     reload=self._wake_all, name=self._channel)

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    def ticket(self, team_id: str | None) -> asyncio.Event:
        """The team's current ticket (None: every team's), shared by its readers."""
        return self._tickets.setdefault(team_id or EVERY_TEAM, asyncio.Event())

    async def wait(self, ticket: asyncio.Event, timeout: float) -> None:
        """Until the ticket's team changes, or `timeout`; at most POLL_S while the listener is
        not known to be healthy (notifications may be missed then: the reader polls)."""
        if not self._listener.healthy:
            timeout = min(timeout, POLL_S)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ticket.wait(), timeout)

    def _wake(self, team_id: str) -> None:
        for key in (team_id, EVERY_TEAM):
            ticket = self._tickets.pop(key, None)
            if ticket is not None:
                ticket.set()  # every reader holding it wakes; the next ticket is a fresh one

    async def _wake_all(self) -> None:
        while self._tickets:
            self._tickets.popitem()[1].set()
