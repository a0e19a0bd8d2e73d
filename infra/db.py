"""Postgres: the connection pool, what its errors mean (away for now, or refusing this data),
and the ordered SQL migrations.

A DSN may name several hosts (`postgresql://u:p@pg-a:5432,pg-b:5432/db?target_session_attrs=read-write`):
each new connection goes to the first host that is the primary. A connection that meets a
read-only server (a demoted primary, a standby, a DNS name still on the old node) is no use
for writing: `note_failure` drops the pool's connections so the next ones find the primary.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

import asyncpg
import orjson
import structlog

log = structlog.get_logger("toolproxy.db")

T = TypeVar("T")

_MIGRATION_LOCK = 0x70726F78  # pg_advisory_xact_lock key: one migrator at a time across replicas


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ, encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
        )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Released connections are not reset: nothing here leaves session state behind (no SET
    outside a transaction, no LISTEN, no session advisory lock), and asyncpg's default reset
    is a query per release."""


CONNECT_TIMEOUT_S = 5.0  # per new connection (asyncpg's default, 60 s, outlasts every caller)


def session_attrs(url: str) -> dict[str, str]:
    """Connections that write must reach the primary: with several hosts and no
    target_session_attrs of the operator's (in the DSN or PGTARGETSESSIONATTRS), read-write."""
    import os
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    several = "," in parts.netloc.rpartition("@")[2]
    if not several or "target_session_attrs" in parse_qs(parts.query) or os.environ.get("PGTARGETSESSIONATTRS"):
        return {}
    return {"target_session_attrs": "read-write"}


async def connect(url: str, **kwargs: object) -> asyncpg.Connection:
    """One connection outside the pool (a LISTEN, a migration), to the primary as the pool's."""
    return await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_S, **session_attrs(url), **kwargs)  # type: ignore[arg-type]


async def create_pool(url: str, *, min_size: int = 2, max_size: int = 20) -> asyncpg.Pool:
    """Every process's pool. A query on any of its connections answered read-only marks all of
    them for replacement (the next acquisition connects to the host that is the primary now),
    whoever made the query: the journal's writer, a governance route, a tool's service."""
    created: list[asyncpg.Pool] = []

    def read_only_answer(record: Any) -> None:
        if created and record.exception is not None and read_only(record.exception):
            task = asyncio.ensure_future(created[0].expire_connections())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        conn.add_query_logger(read_only_answer)

    pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, init=init, command_timeout=30,
        reset=_keep_session, timeout=CONNECT_TIMEOUT_S, **session_attrs(url),
    )
    assert pool is not None
    created.append(pool)
    return pool


_ABANDONED: set[asyncio.Task[object]] = set()


async def within(timeout_s: float, work: Awaitable[T]) -> T:
    """`work`'s result, or asyncio.TimeoutError after `timeout_s`. A query cancelled on a
    stalled server would hold its caller until the connection is given back (asyncpg waits
    for it, up to the command timeout): past the bound, the work is left to end on its own
    instead, its connection returned to the pool when it does."""
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout_s)
    except asyncio.TimeoutError:
        _ABANDONED.add(task)  # type: ignore[arg-type]
        task.add_done_callback(_forget)
        raise
    except asyncio.CancelledError:
        task.cancel()
        raise


def _forget(task: asyncio.Task[object]) -> None:
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned query's failure is expected


# --- what an error means ------------------------------------------------------------------

# Postgres away, stalled, starting or stopping, out of connections or in a conflict that a
# retry resolves (deadlock, serialization, recovery conflict). AdminShutdownError and
# CannotConnectNowError are "operator intervention" errors in asyncpg, not connection errors.
_AWAY = (
    OSError, asyncio.TimeoutError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, cancelled
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full
    asyncpg.exceptions.TransactionRollbackError,  # deadlock, serialization, recovery conflict
    # No host of the DSN is the primary (yet: TargetServerAttributeNotMatched), or the client's
    # protocol state broken by a connection lost mid-operation ("another operation is in
    # progress", seen as a primary shuts down): the connection's, not the data's.
    asyncpg.exceptions.InternalClientError,
)
# The classes of SQLSTATE that speak of the data sent, not of the server: data exceptions
# (22), integrity constraints (23), program limits such as a row too large (54).
_DATA_CLASSES = frozenset({"22", "23", "54"})


def read_only(exc: BaseException) -> bool:
    """The server answers but will not write: a hot standby, a demoted primary, a primary
    with default_transaction_read_only on (25006), or one still recovering."""
    if isinstance(exc, asyncpg.exceptions.ReadOnlySQLTransactionError):
        return True
    return (isinstance(exc, asyncpg.exceptions.ObjectNotInPrerequisiteStateError)
            and "recovery" in str(exc))


def unavailable(exc: BaseException) -> bool:
    """Postgres cannot take this now, and may in a moment: away, stalled, busy, or not the
    primary. Never the data's fault: a write refused so is retried, never set aside."""
    if isinstance(exc, asyncpg.exceptions.DataError) or isinstance(exc, ValueError):
        return False  # the client refused to encode the data (asyncpg's is an InterfaceError)
    if isinstance(exc, asyncpg.exceptions.InterfaceError):
        return True  # the connection is gone or unusable
    return isinstance(exc, _AWAY) or read_only(exc)


def refuses_the_data(exc: BaseException) -> bool:
    """Postgres (or the client encoding for it) refuses what was sent: a retry of the same
    data fails the same way. A server error of any other kind (an unknown table or column, a
    permission, a bug in our SQL) is the deployment's, and refuses every record alike."""
    if unavailable(exc):
        return False
    if isinstance(exc, asyncpg.PostgresError):
        return (exc.sqlstate or "")[:2] in _DATA_CLASSES
    return True


async def note_failure(pool: asyncpg.Pool, exc: BaseException) -> None:
    """After a read-only answer, the pool's connections point at a server that will not
    write: they are all replaced at their next use (a cheap mark, however often it is made),
    and a new connection goes to the host that is the primary now."""
    if read_only(exc):
        await pool.expire_connections()


@dataclass(frozen=True)
class Migration:
    version: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    files = resources.files("migrations")
    found = [f for f in files.iterdir() if f.name.endswith(".sql")]
    return [Migration(f.name.removesuffix(".sql"), f.read_text()) for f in sorted(found, key=lambda f: f.name)]


class MigrationError(RuntimeError):
    """An applied migration was edited afterwards, or a migration failed."""


async def migrate(url: str) -> list[str]:
    """Apply pending migrations, each in its own transaction. Returns the versions applied."""
    conn = await connect(url)
    applied_now: list[str] = []
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version text PRIMARY KEY,
                   checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for m in load_migrations():
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
                done = await conn.fetchval(
                    "SELECT checksum FROM schema_migrations WHERE version = $1", m.version
                )
                if done is not None:
                    if done != m.checksum:
                        raise MigrationError(f"migration {m.version} changed after it was applied")
                    continue
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
                    m.version,
                    m.checksum,
                )
                applied_now.append(m.version)
                log.info("migration_applied", version=m.version)
    finally:
        await conn.close()
    return applied_now
