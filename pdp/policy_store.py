"""Policy revisions kept in Postgres: push validates and activates; every replica follows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from infra.pg_listener import Follower, Listener
from pdp.policy_set import PolicySet

CHANNEL = "toolproxy_policy"


async def active_policies(pool: asyncpg.Pool) -> PolicySet | None:
    row = await pool.fetchrow(
        """SELECT p.modules FROM policy_active a JOIN policies p USING (revision)"""
    )
    if row is None:
        return None
    return PolicySet(modules=dict(row["modules"]), tests={})


async def activate(pool: asyncpg.Pool, policies: PolicySet, *, created_by: str,
                   test_results: list[dict[str, Any]] | None = None) -> str:
    """Store the revision (content-addressed) and make it the active one; NOTIFY follows.
    With `test_results`, the unit tests it was pushed with and their results are kept beside
    it, in the same transaction (the latest push of a revision wins)."""
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
        if test_results is not None:
            await conn.execute(
                """INSERT INTO policy_test_runs (revision, tests, results) VALUES ($1, $2, $3)
                   ON CONFLICT (revision) DO UPDATE SET tests = EXCLUDED.tests,
                                                        results = EXCLUDED.results, ran_at = now()""",
                revision, policies.tests, test_results,
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


async def revision_modules(pool: asyncpg.Pool, revision: str) -> dict[str, str] | None:
    """The modules of a pushed revision (None: not pushed through the API)."""
    row = await pool.fetchrow("SELECT modules FROM policies WHERE revision = $1", revision)
    return None if row is None else dict(row["modules"])


async def revision_tests(pool: asyncpg.Pool, revision: str) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT tests, results, ran_at FROM policy_test_runs WHERE revision = $1", revision)
    if row is None:
        return None
    return {"tests": sorted(row["tests"]), "results": list(row["results"]),
            "ran_at": row["ran_at"].isoformat()}


class PolicyWatcher:
    """Follows activations and hands each new revision to `apply` (which may reject it), with
    whether something asked for it (a push, a reconnect) rather than the periodic check."""

    def __init__(self, pool: asyncpg.Pool, listener: Listener,
                 apply: Callable[[PolicySet, bool], Awaitable[None]]) -> None:
        self._pool = pool
        self._listener = listener
        self._apply = apply
        self._follower: Follower | None = None

    async def start(self) -> None:
        self._follower = await self._listener.follow(CHANNEL, reload=self._refresh, every_s=30.0,
                                                     name="policy-watcher")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    async def _refresh(self) -> None:
        assert self._follower is not None
        policies = await active_policies(self._pool)
        if policies is not None:
            await self._apply(policies, self._follower.asked)
