"""The CSRF token every console request carries, and the per-identity rate guard on its
mutations (seed 000's rule); the Origin and Host checks are in origin.py."""

from __future__ import annotations

import hmac
import math
import time

import asyncpg
from aiohttp import web

from proxy.web.console.errors import ConsoleRateLimited, CsrfFailed
from proxy.web.console.session import postgres
from proxy.core.limits.gcra import Rate

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def check_csrf(request: web.Request, expected: str) -> None:
    given = request.headers.get(CSRF_HEADER)
    if not given:
        raise CsrfFailed(f"the console's requests carry the {CSRF_HEADER} header")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("ascii")):
        raise CsrfFailed("the CSRF token does not match this session")


# One statement: take a cell from the identity's bucket if it has one (GCRA), else nothing.
_TAKE = """
INSERT INTO console_rate AS r (key, tat) VALUES ($1, $2::float8 + $3::float8)
ON CONFLICT (key) DO UPDATE SET tat = GREATEST(r.tat, $2::float8) + $3::float8, updated_at = now()
    WHERE GREATEST(r.tat, $2::float8) - $4::float8 <= $2::float8
RETURNING tat"""


class RateGuard:
    """The per-identity rate guard on console mutations, in Postgres (shared by replicas)."""

    def __init__(self, pool: asyncpg.Pool, rate: Rate) -> None:
        self._pool = pool
        self._rate = rate

    async def take(self, key: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with postgres("the console's rate guard"):
            tat = await self._pool.fetchval(_TAKE, key, now, self._rate.interval, self._rate.tolerance)
            if tat is not None:
                return
            current = await self._pool.fetchval("SELECT tat FROM console_rate WHERE key = $1", key)
        wait = max(0.0, float(current or now) - self._rate.tolerance - now)
        raise ConsoleRateLimited(
            "too many console changes; wait a moment",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )

    async def sweep(self, now: float | None = None) -> None:
        """Buckets full again are the same as none: forget them (the table stays small)."""
        now = time.time() if now is None else now
        with postgres("the console's rate guard"):
            await self._pool.execute("DELETE FROM console_rate WHERE tat < $1::float8", now)
