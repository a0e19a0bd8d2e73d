"""The test infrastructure itself: migrations applied, JetStream enabled."""

from __future__ import annotations

import asyncpg
import nats

from infra.db import load_migrations, migrate


async def test_migrations_applied_once(db_pool: asyncpg.Pool, database_url: str) -> None:
    versions = [r["version"] for r in await db_pool.fetch("SELECT version FROM schema_migrations")]
    assert versions == [m.version for m in load_migrations()]
    assert await migrate(database_url) == []  # idempotent
    products = await db_pool.fetch("SELECT product_id FROM greenfood_products ORDER BY 1")
    assert [r["product_id"] for r in products] == ["apple", "bread", "milk"]


async def test_jetstream_enabled(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().account_info()
        assert info.limits is not None
    finally:
        await nc.close()
