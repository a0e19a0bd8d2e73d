"""One LISTEN connection per replica, shared by every channel (grants, policy, events), and
`Listener.follow`: the one way a cache or a wake-up keeps in step with a channel.

Handlers get each notification's payload. If the connection drops, it is re-opened and every
`on_reconnect` hook runs: notifications sent meanwhile were missed, so caches reload in full.
A connection cut off silently (no RST: a dead host, a black-holed route, a stalled server)
still looks open, so it is asked `SELECT 1` every `ping_every_s`; one that does not answer
within `ping_timeout_s` is dropped and replaced the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
import structlog

from infra.db import connect
from infra.lifecycle import cancel_and_wait

log = structlog.get_logger("toolproxy.listener")

Handler = Callable[[str], None]
# A follower's handler may also return a coroutine: the follower runs it as a task it keeps.
OnNotify = Callable[[str], Coroutine[Any, Any, object] | None]
Reload = Callable[[], Awaitable[object]]


class Listener:
    def __init__(self, dsn: str, *, check_every_s: float = 1.0, ping_every_s: float = 5.0,
                 ping_timeout_s: float = 2.0) -> None:
        self._dsn = dsn
        self._check_every_s = check_every_s
        self._ping_every_s = ping_every_s
        self._ping_timeout_s = ping_timeout_s
        self._handlers: dict[str, list[Handler]] = {}
        self._reconnect_hooks: list[Callable[[], None]] = []
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._answered_at = 0.0  # loop time of the connection's last sign of life

    async def start(self) -> None:
        await self._connect()
        self._task = asyncio.create_task(self._keep(), name="pg-listener")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        if self._conn is not None and not self._conn.is_closed():
            try:
                await self._conn.close(timeout=self._ping_timeout_s)
            except Exception:  # a connection that does not answer is cut
                self._conn.terminate()

    async def subscribe(self, channel: str, handler: Handler,
                        on_reconnect: Callable[[], None] | None = None) -> None:
        first = channel not in self._handlers
        self._handlers.setdefault(channel, []).append(handler)
        if on_reconnect is not None:
            self._reconnect_hooks.append(on_reconnect)
        if first and self._conn is not None and not self._conn.is_closed():
            await self._conn.add_listener(channel, self._dispatch)

    async def follow(self, channel: str, on_notify: OnNotify | None = None, *,
                     reload: Reload | None = None, every_s: float | None = None,
                     retry_s: float = 1.0, reload_first: bool = False,
                     name: str | None = None) -> Follower:
        """Follow `channel` until the returned Follower is closed. Each notification goes to
        `on_notify` (without one, it asks for a `reload`); a reconnect asks for a `reload`
        (notifications were missed), and so does `every_s` passing, as a safety net. Asks
        that come while a reload runs make one more reload, not one each. `reload_first`:
        subscribed, load once before returning; if that fails, nothing is left running."""
        follower = Follower(name or channel, on_notify, reload=reload, every_s=every_s,
                            retry_s=retry_s)
        await self.subscribe(channel, follower.notify, on_reconnect=follower.stale)
        try:
            await follower.start(reload_first=reload_first)
        except BaseException:
            await follower.close()
            raise
        return follower

    @property
    def up(self) -> bool:
        """The connection is open (one silently cut off is noticed at the next ping)."""
        return self._conn is not None and not self._conn.is_closed()

    @property
    def healthy(self) -> bool:
        """Open and answering: its last ping (or connect) is recent. While it is not,
        notifications may be missed, and readers that rely on them poll instead."""
        if not self.up:
            return False
        age = asyncio.get_running_loop().time() - self._answered_at
        return age <= self._ping_every_s + self._ping_timeout_s + self._check_every_s

    def _dispatch(self, conn: object, pid: int, channel: str, payload: str) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("notification_handler_failed", channel=channel)

    async def _connect(self) -> None:
        conn = await connect(self._dsn)
        try:
            for channel in self._handlers:
                await asyncio.wait_for(conn.add_listener(channel, self._dispatch), self._ping_timeout_s)
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn
        self._answered_at = asyncio.get_running_loop().time()

    async def _alive(self) -> bool:
        """A ping on the LISTEN connection, every `ping_every_s`: False if it did not answer
        in time (the connection is then dropped)."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._answered_at < self._ping_every_s:
            return True
        conn = self._conn
        assert conn is not None
        try:
            await asyncio.wait_for(conn.fetchval("SELECT 1"), self._ping_timeout_s)
        except Exception as exc:
            log.warning("listener_unresponsive", error=str(exc) or type(exc).__name__)
            conn.terminate()  # no goodbye over a connection that does not answer
            return False
        self._answered_at = loop.time()
        return True

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._check_every_s)
            if self.up and await self._alive():
                continue
            try:
                await self._connect()
            except Exception as exc:  # Postgres away: keep trying
                log.warning("listener_reconnect_failed", error=str(exc) or type(exc).__name__)
                continue
            log.info("listener_reconnected")
            for hook in self._reconnect_hooks:
                hook()


class Follower:
    """One cache or wake-up kept in step with a channel; every task it starts is its own, and
    `close` ends them all. Built by `Listener.follow`; built directly (and `start`ed) it only
    reloads every `every_s`, for a process without a listener."""

    def __init__(self, name: str, on_notify: OnNotify | None = None, *,
                 reload: Reload | None = None, every_s: float | None = None,
                 retry_s: float = 1.0) -> None:
        if on_notify is None and reload is None:
            raise ValueError("a follower needs a handler, a reload, or both")
        self.name = name
        self._on_notify = on_notify
        self._reload = reload
        self._every_s = every_s
        self._retry_s = retry_s
        self._stale = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        # While a reload runs: whether something asked for it (a notification, a reconnect,
        # a failed try), rather than `every_s` passing.
        self.asked = False

    async def start(self, *, reload_first: bool = False) -> None:
        if self._reload is None:
            return
        if reload_first:
            await self._reload()
        self._loop = asyncio.create_task(self._follow(), name=f"follow-{self.name}")

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(self._loop)
        while self._tasks:
            await cancel_and_wait(self._tasks.pop())

    def notify(self, payload: str) -> None:
        if self._closed:
            return
        if self._on_notify is None:
            self.stale()
            return
        work = self._on_notify(payload)
        if work is not None:
            task = asyncio.get_running_loop().create_task(self._guarded(work, payload))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def stale(self) -> None:
        """Ask for a full reload (what is held may be out of date)."""
        if not self._closed and self._reload is not None:
            self._stale.set()

    async def _guarded(self, work: Coroutine[Any, Any, object], payload: str) -> None:
        try:
            await work
        except Exception as exc:  # a full reload puts right what this one could not
            log.warning("follow_notify_failed", follower=self.name, payload=payload[:200],
                        error=str(exc) or type(exc).__name__)
            self.stale()

    async def _follow(self) -> None:
        assert self._reload is not None
        while True:
            self.asked = False
            if self._every_s is None:
                await self._stale.wait()
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stale.wait(), self._every_s)
            self.asked = self._stale.is_set()
            self._stale.clear()
            try:
                await self._reload()
            except Exception as exc:
                log.warning("follow_reload_failed", follower=self.name,
                            error=str(exc) or type(exc).__name__)
                await asyncio.sleep(self._retry_s)
                self._stale.set()
