"""`toolproxy migrate --check [--wait S]`: whether the database has every migration this code
ships, read-only (a deployment's pods wait on it while one Job runs the DDL)."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from cli.errors import CliError
from infra.db import load_migrations


async def pending(url: str) -> list[str]:
    """The versions this code ships that the database has not applied; an applied one edited
    since is an error (as for `migrate`)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
            return [m.version for m in load_migrations()]
        applied = {r["version"]: r["checksum"]
                   for r in await conn.fetch("SELECT version, checksum FROM schema_migrations")}
    finally:
        await conn.close()
    missing = []
    for m in load_migrations():
        done = applied.get(m.version)
        if done is None:
            missing.append(m.version)
        elif done != m.checksum:
            raise CliError(f"migration {m.version} changed after it was applied")
    return missing


async def check(url: str, wait_s: float, every_s: float = 2.0) -> str:
    """Returns a one-line summary once nothing is pending; waits up to `wait_s` for that
    (Postgres unreachable meanwhile counts as pending), then fails with one line."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            missing = await pending(url)
            problem = f"pending: {', '.join(missing)}" if missing else ""
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError) as exc:
            problem = f"cannot check: {type(exc).__name__}: {exc}".rstrip(": ")
        if not problem:
            return f"up to date ({len(load_migrations())} migrations)"
        if time.monotonic() >= deadline:
            waited = f" after {wait_s:.0f}s" if wait_s else ""
            raise CliError(f"migrations {problem}{waited} (run `toolproxy migrate`, or wait for "
                           "the migrations Job)")
        await asyncio.sleep(min(every_s, max(0.0, deadline - time.monotonic())))
