"""What every console request is held to: the exact Host its session was opened on, the
CSRF token, and for mutations the Origin and the per-identity rate guard (seed 000's rule)."""

from __future__ import annotations

import hmac
import math
import time
from urllib.parse import urlsplit

import asyncpg
from aiohttp import web

from proxy.console.errors import ConsoleRateLimited, CsrfFailed, OriginRefused
from proxy.console.session import postgres
from proxy.limits.gcra import Rate

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_of(request: web.Request) -> str:
    """The Host header exactly as sent (lowercased: host names are case-insensitive)."""
    return request.headers.get("Host", "").strip().lower()


def check_origin(request: web.Request) -> None:
    """A mutation comes from a page of this very Host: `Origin` is `scheme://<Host>` exactly
    (https when the request came over TLS), and the browser's Sec-Fetch-Site, where it sends
    one, says same-origin. A missing or `null` Origin is refused: browsers send it on every
    cross-origin request and on every same-origin POST."""
    origin = request.headers.get("Origin")
    host = host_of(request)
    if not origin or not host:
        raise OriginRefused("this request needs an Origin and a Host header")
    parts = urlsplit(origin.strip().lower())
    schemes = ("https",) if request.secure else ("http", "https")
    if (parts.scheme not in schemes or parts.netloc != host or parts.path not in ("", "/")
            or parts.query or parts.fragment or parts.username is not None):
        raise OriginRefused("the Origin is not this console's own")
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        raise OriginRefused("the request did not come from this console's own pages")


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
