"""The grant cache applies reads in the order they began: a slow, older read of a team's
grants never undoes a newer one (a revocation must not come back)."""

from __future__ import annotations

import asyncio
import contextlib

from pdp.data.grants import GrantCache, GrantRepository


class _SlowFirstRelease:
    """The real pool; the first connection it lends is given back only when `gate` opens (so
    that read ends after the next one, having seen older data)."""

    def __init__(self, pool) -> None:
        self._pool = pool
        self.gate = asyncio.Event()
        self._first = True

    @contextlib.asynccontextmanager
    async def acquire(self):
        first, self._first = self._first, False
        async with self._pool.acquire() as conn:
            yield conn
            if first:
                await self.gate.wait()


async def test_an_older_read_never_undoes_a_newer_one(db_pool, team) -> None:
    repo = GrantRepository(db_pool)
    await repo.add(team_id=team, agent_id=None, capability="tool.task.list.invoke", created_by="t")
    slow = _SlowFirstRelease(db_pool)
    cache = GrantCache(slow, listener=None)  # type: ignore[arg-type]
    older = asyncio.create_task(cache.reload_team(team))  # reads "granted", then is held back
    await asyncio.sleep(0.1)
    await repo.revoke(team_id=team, agent_id=None, capability="tool.task.list.invoke")
    await cache.reload_team(team)  # the newer read: revoked
    assert cache.capabilities(team, "a") == []
    slow.gate.set()
    await older
    assert cache.capabilities(team, "a") == []  # the older read was not applied over it


async def test_a_team_read_newer_than_a_full_reload_survives_it(db_pool, team) -> None:
    repo = GrantRepository(db_pool)
    await repo.add(team_id=team, agent_id=None, capability="tool.task.list.invoke", created_by="t")
    slow = _SlowFirstRelease(db_pool)
    cache = GrantCache(slow, listener=None)  # type: ignore[arg-type]
    full = asyncio.create_task(cache.reload_all())  # sees the grant, held back
    await asyncio.sleep(0.1)
    await repo.revoke(team_id=team, agent_id=None, capability="tool.task.list.invoke")
    await cache.reload_team(team)
    slow.gate.set()
    await full
    assert cache.capabilities(team, "a") == [] and cache.ready
