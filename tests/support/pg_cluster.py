"""A Postgres primary and a streaming standby of its own on loopback (the embedded binaries),
for failover drills: turn the primary read-only, stop it, promote the standby. Stopped by PID."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

import asyncpg

from infra.db import migrate
from infra.embedded.ports import free_port
from infra.embedded.postgres import DATABASE, EmbeddedPostgres
from tests.support.infra import scratch_dir


class PgPair:
    """`primary` (migrated database `toolproxy`) and, after `add_standby()`, `standby`."""

    def __init__(self) -> None:
        self.root = scratch_dir("toolproxy-pg-pair-")
        self.primary = EmbeddedPostgres(self.root / "a", free_port())
        self.standby: EmbeddedPostgres | None = None

    async def start(self) -> None:
        self.primary.prepare()
        self.primary.start(self.root / "a.log")
        await self.primary.wait_ready()
        await migrate(self.primary.url())

    async def add_standby(self) -> EmbeddedPostgres:
        standby = self.standby = EmbeddedPostgres(self.root / "b", free_port())
        standby.standby_of(self.primary)
        standby.start(self.root / "b.log")
        await standby.wait_ready()
        return standby

    def dsn(self, *servers: EmbeddedPostgres, database: str = DATABASE) -> str:
        """One DSN naming these servers in order (the primary's password is everyone's);
        asyncpg adds target_session_attrs=read-write for several (infra.db)."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
        return f"postgresql://postgres:{quote(self.primary.password, safe='')}@{hosts}/{database}"

    async def sql(self, server: EmbeddedPostgres, query: str, *args: object) -> object:
        conn = await asyncpg.connect(server.url("postgres"), timeout=5)
        try:
            return await conn.fetchval(query, *args)
        finally:
            await conn.close()

    async def read_only(self, server: EmbeddedPostgres, on: bool) -> None:
        """As the issue did it: ALTER SYSTEM default_transaction_read_only + pg_reload_conf()
        (sessions already open follow it too)."""
        await self.sql(server, f"ALTER SYSTEM SET default_transaction_read_only = {'on' if on else 'off'}")
        await self.sql(server, "SELECT pg_reload_conf()")

    async def count(self, server: EmbeddedPostgres, query: str, *args: object) -> int:
        conn = await asyncpg.connect(server.url(), timeout=5)
        try:
            return int(await conn.fetchval(query, *args))
        finally:
            await conn.close()

    async def rows(self, server: EmbeddedPostgres, query: str, *args: object) -> list[object]:
        """The first column of every row."""
        conn = await asyncpg.connect(server.url(), timeout=5)
        try:
            return [r[0] for r in await conn.fetch(query, *args)]
        finally:
            await conn.close()

    def remove(self) -> None:
        for server in (self.standby, self.primary):
            if server is not None:
                server.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def logs(self) -> Path:
        return self.root
