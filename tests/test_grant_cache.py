"""The grant cache under overlapping reloads: a reload that read the rows before a change
never puts them back after a reload that read the change (against the real Postgres)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from pdp.grants import GrantCache


class SlowFirstRead:
    """The real pool, except that the first connection handed out answers its reads late:
    the rows are read at once, and returned `delay` seconds later (a reload stalled between
    its read and its write-back, as a busy event loop or a slow network does)."""

    def __init__(self, pool: asyncpg.Pool, delay: float) -> None:
        self._pool = pool
        self._delay = delay
        self._first = True
        self.first_read = asyncio.Event()

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self._pool.acquire() as conn:
            if not self._first:
                yield conn
                return
            self._first = False
            yield _Late(conn, self._delay, self.first_read)


class _Late:
    def __init__(self, conn: asyncpg.Connection, delay: float, read: asyncio.Event) -> None:
        self._conn, self._delay, self._read = conn, delay, read

    def transaction(self, **kw: Any) -> Any:
        return self._conn.transaction(**kw)

    async def fetch(self, *args: Any) -> list[asyncpg.Record]:
        rows = await self._conn.fetch(*args)
        self._read.set()
        await asyncio.sleep(self._delay)
        return rows


async def test_a_stale_reload_never_overwrites_a_newer_one(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    slow = SlowFirstRead(db_pool, delay=0.3)
    cache = GrantCache(slow, listener=None)  # type: ignore[arg-type]  # reloads only
    first = asyncio.create_task(cache.reload_team(team))  # reads: no grant yet
    await slow.first_read.wait()
    await db_pool.execute(
        "INSERT INTO grants (grant_id, team_id, agent_id, capability, created_by)"
        " VALUES ($1, $2, NULL, 'tool.task.list.invoke', 'test')", uuid.uuid4(), team)
    second = asyncio.create_task(cache.reload_team(team))  # the NOTIFY of the new grant
    await asyncio.gather(first, second)
    assert cache.capabilities(team, "agent-1") == ["tool.task.list.invoke"]
