"""Wakes event streams when their team has new events: one LISTEN connection per replica,
one condition per team (the writer NOTIFYs after each batch, from whichever replica)."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from proxy.events import CHANNEL

log = structlog.get_logger("toolproxy.events")


class EventHub:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None
        self._waiters: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._listen()
        self._task = asyncio.create_task(self._keep(), name="event-hub")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    async def wait(self, team_id: str, timeout: float) -> None:
        """Until the team has news, or `timeout` (streams re-check either way)."""
        ev = self._waiters.setdefault(team_id, asyncio.Event())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ev.wait(), timeout)

    async def _listen(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        await conn.add_listener(CHANNEL, self._on_notify)
        self._conn = conn

    def _on_notify(self, conn: object, pid: int, channel: str, team_id: str) -> None:
        ev = self._waiters.pop(team_id, None)
        if ev is not None:
            ev.set()  # everyone waiting on this team wakes; the next wait gets a fresh event

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(5.0)
            if self._conn is None or self._conn.is_closed():
                try:
                    await self._listen()
                except Exception as exc:  # streams fall back to their periodic re-check
                    log.warning("event_listener_down", error=str(exc))
