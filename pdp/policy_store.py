"""Policy revisions kept in Postgres: push validates and activates; every replica follows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncpg
import structlog

from pdp.listener import Listener
from pdp.policy_set import PolicySet

log = structlog.get_logger("toolproxy.policy")

CHANNEL = "toolproxy_policy"


async def active_policies(pool: asyncpg.Pool) -> PolicySet | None:
    row = await pool.fetchrow(
        """SELECT p.modules FROM policy_active a JOIN policies p USING (revision)"""
    )
    if row is None:
        return None
    return PolicySet(modules=dict(row["modules"]), tests={})


async def activate(pool: asyncpg.Pool, policies: PolicySet, *, created_by: str) -> str:
    """Store the revision (content-addressed) and make it the active one; NOTIFY follows."""
    revision = policies.revision
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """INSERT INTO policies (revision, modules, created_by) VALUES ($1, $2, $3)
               ON CONFLICT (revision) DO NOTHING""",
            revision, policies.modules, created_by,
        )
        await conn.execute(
            """INSERT INTO policy_active (singleton, revision) VALUES (true, $1)
               ON CONFLICT (singleton) DO UPDATE SET revision = EXCLUDED.revision,
                                                     activated_at = now()""",
            revision,
        )
    return revision


async def revisions(pool: asyncpg.Pool, limit: int = 20) -> list[dict[str, object]]:
    rows = await pool.fetch(
        """SELECT p.revision, p.created_by, p.created_at, (a.revision IS NOT NULL) AS active,
                  (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(p.modules) k) AS files
           FROM policies p LEFT JOIN policy_active a USING (revision)
           ORDER BY p.created_at DESC LIMIT $1""",
        limit,
    )
    return [
        {"revision": r["revision"], "created_by": r["created_by"],
         "created_at": r["created_at"].isoformat(), "active": r["active"], "files": r["files"]}
        for r in rows
    ]


class PolicyWatcher:
    """Follows activations and hands each new revision to `apply` (which may reject it)."""

    def __init__(self, pool: asyncpg.Pool, listener: Listener,
                 apply: Callable[[PolicySet, bool], Awaitable[None]]) -> None:
        self._pool = pool
        self._listener = listener
        self._apply = apply
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def start(self) -> None:
        await self._listener.subscribe(CHANNEL, lambda _: self._wake.set(), on_reconnect=self._wake.set)
        self._task = asyncio.create_task(self._loop(), name="policy-watcher")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            woken = False
            with contextlib.suppress(asyncio.TimeoutError):
                woken = await asyncio.wait_for(self._wake.wait(), 30.0)
            self._wake.clear()
            try:
                policies = await active_policies(self._pool)
                if policies is not None:
                    await self._apply(policies, woken)
            except Exception as exc:
                log.warning("policy_refresh_failed", error=str(exc))
                await asyncio.sleep(1.0)
                self._wake.set()
