"""A LISTEN connection cut off silently (no RST: a stalled server, a black-holed route) is
noticed by its ping and replaced, with every reconnect hook run (caches reload in full); while
it is not healthy, readers waiting for a wake-up poll instead of waiting for a notification
that cannot come."""

from __future__ import annotations

import time
import uuid
from urllib.parse import urlsplit

from infra.pg_listener import Listener
from infra.wakeups import POLL_S, TeamWakeups
from tests.support.tcp_relay import TcpRelay
from tests.support.waiting import until


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
        assert await until(lambda: "before" in heard, 5), "not within the bound"
        assert listener.healthy

        relay.pause()
        paused_at = time.monotonic()
        assert await until(lambda: not listener.healthy, 3), "not within the bound"
        # A reader does not wait for a notification that cannot come: it reads again soon.
        t0 = time.monotonic()
        await hub.wait(hub.ticket("team-x"), timeout=30)
        assert time.monotonic() - t0 <= POLL_S + 0.5

        relay.resume()
        assert await until(lambda: bool(reconnects) and listener.healthy, 10), "not within the bound"
        assert reconnects[0] > paused_at
        await db_pool.execute("SELECT pg_notify($1, 'after')", channel)
        assert await until(lambda: "after" in heard, 5), "not within the bound"
    finally:
        relay.resume()
        await hub.close()
        await listener.close()
        await relay.close()
