"""Console sessions, kept in Postgres: a random cookie secret (only its SHA-256 is stored),
bound to the identity, the exact Host it was opened on and a CSRF token, and expiring."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

import asyncpg

from proxy.errors import DependencyUnavailable
from proxy.identity.identity import Identity

# "__Host-" (Secure, Path=/, no Domain: no subdomain can set or shadow it) over TLS; the plain
# name over http (browsers refuse the prefix without Secure).
COOKIE = "toolproxy_console"
SECURE_COOKIE = "__Host-toolproxy_console"
_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{43}", re.ASCII)  # token_urlsafe(32)
MAX_PER_IDENTITY = 20  # older sessions of the same identity are closed beyond this


@dataclass(frozen=True, slots=True)
class Session:
    identity: Identity
    host: str
    csrf_token: str
    expires_at: datetime

    def as_json(self) -> dict[str, object]:
        i = self.identity
        return {"identity": {"agent_id": i.agent_id, "team_id": i.team_id, "role": i.role},
                "csrf_token": self.csrf_token, "expires_at": self.expires_at.isoformat()}


@contextlib.contextmanager
def postgres(what: str) -> Iterator[None]:
    """Postgres away: the console's request is refused 503 (fail closed), not a 500."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError) as exc:
        raise DependencyUnavailable(f"{what} unavailable: {type(exc).__name__}") from None


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii")).digest()


def well_formed(secret: str | None) -> bool:
    return secret is not None and _SECRET_RE.fullmatch(secret) is not None


class SessionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def open(self, identity: Identity, *, host: str, expires_at: datetime) -> tuple[str, Session]:
        """A new session: (the cookie's secret, the session). Expired sessions are swept and
        an identity keeps at most MAX_PER_IDENTITY, in one transaction."""
        secret = secrets.token_urlsafe(32)
        session = Session(identity=identity, host=host, csrf_token=secrets.token_urlsafe(32),
                          expires_at=expires_at)
        with postgres("console sessions"):
            await self._open(secret, session)
        return secret, session

    async def _open(self, secret: str, session: Session) -> None:
        identity = session.identity
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM console_sessions WHERE expires_at <= now()")
            await conn.execute(
                """INSERT INTO console_sessions (session_hash, agent_id, team_id, role, token_id,
                                                 host, csrf_token, expires_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
                _hash(secret), identity.agent_id, identity.team_id, identity.role,
                identity.token_id, session.host, session.csrf_token, session.expires_at,
            )
            await conn.execute(
                """DELETE FROM console_sessions WHERE session_hash IN (
                       SELECT session_hash FROM console_sessions
                       WHERE agent_id = $1 AND team_id = $2 AND role = $3
                       ORDER BY created_at DESC OFFSET $4)""",
                identity.agent_id, identity.team_id, identity.role, MAX_PER_IDENTITY,
            )

    async def get(self, secret: str | None) -> Session | None:
        if not well_formed(secret):
            return None
        assert secret is not None
        with postgres("console sessions"):
            row = await self._pool.fetchrow(
                """SELECT agent_id, team_id, role, token_id, host, csrf_token, expires_at
                   FROM console_sessions WHERE session_hash = $1 AND expires_at > now()""",
                _hash(secret),
            )
        if row is None:
            return None
        identity = Identity(agent_id=row["agent_id"], team_id=row["team_id"], role=row["role"],
                            token_id=row["token_id"])
        return Session(identity=identity, host=row["host"], csrf_token=row["csrf_token"],
                       expires_at=row["expires_at"])

    async def close(self, secret: str | None) -> bool:
        if not well_formed(secret):
            return False
        assert secret is not None
        with postgres("console sessions"):
            done = await self._pool.execute(
                "DELETE FROM console_sessions WHERE session_hash = $1", _hash(secret))
        return done.endswith(" 1")


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)
