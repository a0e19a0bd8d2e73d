"""Postgres: the connection pool and the ordered SQL migrations."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import asyncpg
import orjson
import structlog

log = structlog.get_logger("toolproxy.db")

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


async def create_pool(url: str, *, min_size: int = 2, max_size: int = 20) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, init=_init_connection, command_timeout=30,
        reset=_keep_session,
    )
    assert pool is not None
    return pool


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
    conn = await asyncpg.connect(url)
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
