"""Per-team wake-ups (infra/wakeups.py) on a real Postgres: the ticket taken before reading
catches a change made while the reader reads; a reconnect wakes every reader."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from infra.pg_listener import Listener
from infra.wakeups import TeamWakeups


@pytest.fixture
async def listener(database_url: str) -> AsyncIterator[Listener]:
    listener = Listener(database_url, check_every_s=0.05)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.close()


@pytest.fixture
def channel() -> str:
    return f"test_wakeups_{uuid.uuid4().hex[:10]}"


async def test_a_change_while_reading_still_wakes_the_reader(listener, channel, db_pool) -> None:
    hub = TeamWakeups(listener, channel)
    await hub.start()
    try:
        ticket = hub.ticket("a")  # taken before reading
        await db_pool.execute("SELECT pg_notify($1, 'a')", channel)  # committed while reading
        await asyncio.sleep(0.2)  # the reader is still busy when the notification lands
        started = time.monotonic()
        await hub.wait(ticket, timeout=5)
        assert time.monotonic() - started < 1  # woken, not timed out
        assert hub.ticket("a") is not ticket  # the next reader waits for the next change
    finally:
        await hub.close()


async def test_a_teams_change_wakes_its_readers_and_every_teams_only(listener, channel, db_pool) -> None:
    hub = TeamWakeups(listener, channel)
    await hub.start()
    try:
        a, b, every = hub.ticket("a"), hub.ticket("b"), hub.ticket(None)
        await db_pool.execute("SELECT pg_notify($1, 'a')", channel)
        await asyncio.wait_for(a.wait(), 5)
        await asyncio.wait_for(every.wait(), 5)
        assert not b.is_set()
    finally:
        await hub.close()


async def test_a_reconnect_wakes_every_reader(listener, channel, db_pool) -> None:
    hub = TeamWakeups(listener, channel)
    await hub.start()
    try:
        a, b = hub.ticket("a"), hub.ticket("b")
        await db_pool.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
               WHERE query LIKE $1 AND pid <> pg_backend_pid()""", f"%{channel}%")
        await asyncio.wait_for(a.wait(), 5)  # a change may have been missed: read again
        await asyncio.wait_for(b.wait(), 5)
    finally:
        await hub.close()
