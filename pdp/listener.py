"""One LISTEN connection per replica, shared by every channel (grants, policy, events).

Handlers get each notification's payload. If the connection drops, it is re-opened and every
`on_reconnect` hook runs: notifications sent meanwhile were missed, so caches reload in full.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg
import structlog

log = structlog.get_logger("toolproxy.listener")

Handler = Callable[[str], None]


class Listener:
    def __init__(self, dsn: str, *, check_every_s: float = 1.0) -> None:
        self._dsn = dsn
        self._check_every_s = check_every_s
        self._handlers: dict[str, list[Handler]] = {}
        self._reconnect_hooks: list[Callable[[], None]] = []
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._connect()
        self._task = asyncio.create_task(self._keep(), name="pg-listener")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    async def subscribe(self, channel: str, handler: Handler,
                        on_reconnect: Callable[[], None] | None = None) -> None:
        first = channel not in self._handlers
        self._handlers.setdefault(channel, []).append(handler)
        if on_reconnect is not None:
            self._reconnect_hooks.append(on_reconnect)
        if first and self._conn is not None and not self._conn.is_closed():
            await self._conn.add_listener(channel, self._dispatch)

    @property
    def up(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    def _dispatch(self, conn: object, pid: int, channel: str, payload: str) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("notification_handler_failed", channel=channel)

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        for channel in self._handlers:
            await conn.add_listener(channel, self._dispatch)
        self._conn = conn

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._check_every_s)
            if self.up:
                continue
            try:
                await self._connect()
            except Exception as exc:  # Postgres away: keep trying
                log.warning("listener_reconnect_failed", error=str(exc))
                continue
            log.info("listener_reconnected")
            for hook in self._reconnect_hooks:
                hook()
