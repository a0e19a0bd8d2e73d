"""Following a LISTEN channel (`Listener.follow`) on a real Postgres: what a notification, a
reconnect, a failure and a close each do."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from infra.pg_listener import Listener
from tests.support.waiting import until


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
    return f"test_follow_{uuid.uuid4().hex[:10]}"


class Reloads:
    """A reload that counts, records whether it was asked for, and can be held or made to fail."""

    def __init__(self) -> None:
        self.count = 0
        self.asked: list[bool] = []
        self.gate: asyncio.Event | None = None
        self.failures = 0
        self.follower = None

    async def __call__(self) -> None:
        self.count += 1
        if self.follower is not None:
            self.asked.append(self.follower.asked)
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError("Postgres away")


async def test_a_notification_without_a_handler_asks_for_a_reload(listener, channel, db_pool) -> None:
    reloads = Reloads()
    follower = reloads.follower = await listener.follow(channel, reload=reloads, reload_first=True)
    try:
        assert reloads.count == 1
        await db_pool.execute("SELECT pg_notify($1, 'x')", channel)
        assert await until(lambda: reloads.count == 2, 5.0, every=0.01), "timed out"
        assert reloads.asked == [True]  # recorded from the second: the first ran inside follow()
    finally:
        await follower.close()


async def test_asks_during_a_reload_make_one_more_not_one_each(listener, channel, db_pool) -> None:
    reloads = Reloads()
    follower = await listener.follow(channel, reload=reloads)
    try:
        reloads.gate = asyncio.Event()
        await db_pool.execute("SELECT pg_notify($1, 'x')", channel)
        assert await until(lambda: reloads.count == 1, 5.0, every=0.01), "timed out"  # held
        for n in range(5):
            await db_pool.execute("SELECT pg_notify($1, $2)", channel, str(n))
        await asyncio.sleep(0.2)
        reloads.gate.set()
        assert await until(lambda: reloads.count == 2, 5.0, every=0.01), "timed out"
        await asyncio.sleep(0.2)
        assert reloads.count == 2
    finally:
        await follower.close()


async def test_a_failed_reload_is_tried_again_as_asked(listener, channel, db_pool) -> None:
    reloads = Reloads()
    follower = reloads.follower = await listener.follow(channel, reload=reloads, retry_s=0.05)
    try:
        reloads.failures = 1
        await db_pool.execute("SELECT pg_notify($1, 'x')", channel)
        assert await until(lambda: reloads.count == 2, 5.0, every=0.01), "timed out"
        assert reloads.asked == [True, True]
    finally:
        await follower.close()


async def test_the_periodic_reload_is_not_asked(listener, channel) -> None:
    reloads = Reloads()
    follower = reloads.follower = await listener.follow(channel, reload=reloads, every_s=0.05)
    try:
        assert await until(lambda: reloads.count >= 2, 5.0, every=0.01), "timed out"
        assert set(reloads.asked) == {False}
    finally:
        await follower.close()


async def test_a_reconnect_asks_for_a_reload(listener, channel, db_pool) -> None:
    reloads = Reloads()
    follower = reloads.follower = await listener.follow(channel, reload=reloads)
    try:
        killed = await db_pool.fetchval(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE query LIKE $1 AND pid <> pg_backend_pid()""", f"%{channel}%")
        assert killed == 1
        assert await until(lambda: reloads.count == 1, 5.0, every=0.01), "timed out"
        assert reloads.asked == [True]
        await db_pool.execute("SELECT pg_notify($1, 'x')", channel)  # heard on the new connection
        assert await until(lambda: reloads.count == 2, 5.0, every=0.01), "timed out"
    finally:
        await follower.close()


async def test_a_handlers_work_is_kept_and_ended_by_close(listener, channel, db_pool) -> None:
    started, ended = asyncio.Event(), asyncio.Event()

    async def handle(payload: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    follower = await listener.follow(channel, handle)
    await db_pool.execute("SELECT pg_notify($1, 'team')", channel)
    await asyncio.wait_for(started.wait(), 5)
    await follower.close()
    assert ended.is_set()  # cancelled and awaited, not left running


async def test_a_failed_handler_asks_for_a_full_reload(listener, channel, db_pool) -> None:
    reloads = Reloads()

    async def handle(payload: str) -> None:
        raise OSError("the team's read failed")

    follower = await listener.follow(channel, handle, reload=reloads)
    try:
        await db_pool.execute("SELECT pg_notify($1, 'team')", channel)
        assert await until(lambda: reloads.count == 1, 5.0, every=0.01), "timed out"
    finally:
        await follower.close()


async def test_a_failed_first_load_leaves_nothing_running(listener, channel, db_pool) -> None:
    reloads = Reloads()
    reloads.failures = 1
    with pytest.raises(OSError):
        await listener.follow(channel, reload=reloads, reload_first=True, every_s=0.05)
    await db_pool.execute("SELECT pg_notify($1, 'x')", channel)
    await asyncio.sleep(0.3)
    assert reloads.count == 1


async def test_a_closed_follower_hears_nothing(listener, channel, db_pool) -> None:
    reloads = Reloads()
    follower = await listener.follow(channel, reload=reloads)
    await follower.close()
    await db_pool.execute("SELECT pg_notify($1, 'x')", channel)
    await asyncio.sleep(0.2)
    assert reloads.count == 0
