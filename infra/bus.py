"""The one NATS connection a process owns: reconnecting forever, logging state changes, and
running the owners' hooks after each reconnect (what the server may have lost is re-ensured)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import nats
import structlog
from nats.aio.client import Client as NATS

from infra.nats_auth import NatsAuth

log = structlog.get_logger("toolproxy.nats")

Hook = Callable[[], Awaitable[None]]


class Reconnects:
    """Coroutines run, in order, each time the connection comes back. A restarted server may
    have lost memory-backed streams (rate buckets) or everything (a new store); subscriptions
    come back by themselves, JetStream assets and announcements do not."""

    def __init__(self) -> None:
        self._hooks: list[tuple[str, Hook]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, name: str, hook: Hook) -> None:
        self._hooks.append((name, hook))

    def fire(self) -> None:
        task = asyncio.ensure_future(self._run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        for name, hook in self._hooks:
            try:
                await hook()
            except Exception as exc:  # the next failing call re-ensures it again
                log.warning("reconnect_hook_failed", hook=name, error=str(exc) or type(exc).__name__)


def servers(url: str) -> list[str]:
    """TOOLPROXY_NATS_URL as nats-py's server list: one URL, or several separated by commas
    (the seeds of a cluster; the client learns the others from the one it reaches)."""
    found = [u.strip() for u in url.split(",") if u.strip()]
    if not found:
        raise ValueError("TOOLPROXY_NATS_URL names no server")
    return found


async def connect(url: str, *, name: str, reconnects: Reconnects | None = None,
                  auth: NatsAuth | None = None) -> NATS:
    """`auth`: this process's NATS identity and TLS (infra.nats_auth); none: anonymous."""
    async def on_error(exc: Exception) -> None:
        log.warning("nats_error", error=str(exc) or type(exc).__name__)

    async def on_disconnect() -> None:
        log.warning("nats_disconnected")

    async def on_reconnect() -> None:
        log.info("nats_reconnected")
        if reconnects is not None:
            reconnects.fire()

    return await nats.connect(
        servers(url),  # a seed that is down is passed over for the next
        name=name,
        connect_timeout=5,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        **(auth or NatsAuth()).options(url),
    )


async def close(nc: NATS, *, timeout: float = 5.0) -> None:
    """Drain (finish in-flight work) within `timeout`, then close regardless."""
    try:
        await asyncio.wait_for(nc.drain(), timeout)
    except Exception as exc:
        log.warning("nats_drain_incomplete", error=str(exc) or type(exc).__name__)
    if not nc.is_closed:
        await nc.close()
