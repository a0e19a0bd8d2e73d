"""A LISTEN connection cut off silently (no RST: a stalled server, a black-holed route) is
noticed by its ping and replaced, with every reconnect hook run (caches reload in full); while
it is not healthy, readers waiting for a wake-up poll instead of waiting for a notification
that cannot come."""

from __future__ import annotations

import asyncio
import time
import uuid
from urllib.parse import urlsplit

from infra.pg_listener import Listener
from infra.wakeups import POLL_S, TeamWakeups
from tests.support.tcp_relay import TcpRelay


async def _until(check, seconds: float) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        assert loop.time() < deadline, "not within the bound"
        await asyncio.sleep(0.05)


async def test_a_silent_listen_connection_is_replaced_and_readers_poll_meanwhile(database_url, db_pool) -> None:
    parts = urlsplit(database_url)
    relay = TcpRelay(parts.hostname or "127.0.0.1", parts.port or 5432)
    await relay.start()
    channel = f"tp_keepalive_{uuid.uuid4().hex[:8]}"
    listener = Listener(relay.url_for(database_url, parts.port or 5432), check_every_s=0.1,
                        ping_every_s=0.3, ping_timeout_s=0.3)
    heard: list[str] = []
    reconnects: list[float] = []
    hub = TeamWakeups(listener, channel)
    try:
        await listener.start()
        await listener.subscribe(channel, heard.append, on_reconnect=lambda: reconnects.append(time.monotonic()))
        await hub.start()
        await db_pool.execute("SELECT pg_notify($1, 'before')", channel)
        await _until(lambda: "before" in heard, 5)
        assert listener.healthy

        relay.pause()
        paused_at = time.monotonic()
        await _until(lambda: not listener.healthy, 3)
        # A reader does not wait for a notification that cannot come: it reads again soon.
        t0 = time.monotonic()
        await hub.wait(hub.ticket("team-x"), timeout=30)
        assert time.monotonic() - t0 <= POLL_S + 0.5

        relay.resume()
        await _until(lambda: bool(reconnects) and listener.healthy, 10)
        assert reconnects[0] > paused_at
        await db_pool.execute("SELECT pg_notify($1, 'after')", channel)
        await _until(lambda: "after" in heard, 5)
    finally:
        relay.resume()
        await hub.close()
        await listener.close()
        await relay.close()
