"""Postgres that answers read-only, or is not the primary any more: the journal's records wait
(uncounted) and land once a primary takes them, the pool finding the new one by itself;
nothing is dead-lettered for it. On a Postgres pair of its own (primary + streaming standby)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timezone

import nats
import pytest

from infra.db import create_pool
from proxy.metrics import Metrics
from proxy.records.journal import Journal
from tests.support.journal_entries import call_end
from tests.support.pg_cluster import PgPair
from tests.support.waiting import until


@pytest.fixture(scope="module")
async def nats_url() -> AsyncIterator[str]:
    """A NATS server of this module's own: the session's journal may hold other tests' records,
    which a writer here would take (and write into this module's Postgres)."""
    import shutil

    from infra.embedded.nats import EmbeddedNats
    from infra.embedded.ports import free_port
    from tests.support.infra import scratch_dir

    root = scratch_dir("toolproxy-pg-failover-nats-")
    server = EmbeddedNats(root / "js", free_port())
    server.start(root / "nats.log")
    try:
        await server.wait_ready()
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def pair() -> AsyncIterator[PgPair]:
    pg = PgPair()
    try:
        await pg.start()
        yield pg
    finally:
        pg.remove()


def _sample(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_a_primary_turned_read_only_loses_no_record(pair: PgPair, nats_url: str) -> None:
    """The issue's finding, reproduced: ALTER SYSTEM SET default_transaction_read_only = on +
    pg_reload_conf(); three calls recorded meanwhile. They were dead-lettered after five
    refusals (SQLSTATE 25006 was not transient) and never reached Postgres; now the writer
    retries them, uncounted, for as long as it takes, and they land once the primary writes."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    pool = await create_pool(pair.dsn(pair.primary), min_size=1, max_size=4)
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, pool, metrics, retry_delay_s=0.05)
    try:
        await journal.start()
        await pair.read_only(pair.primary, True)
        ends = [call_end(team) for _ in range(3)]
        for e in ends:
            await journal.record(usage=e.usage, call=e.call, events=e.events, key=e.key)

        async def refused_many_times() -> bool:  # far past the five refusals that set one aside
            return _sample(metrics, "toolproxy_usage_write_errors_total") >= 15
        assert await until(refused_many_times, 15.0)
        await pair.read_only(pair.primary, False)

        async def landed() -> bool:
            return await pair.count(pair.primary, "SELECT count(*) FROM usage_records WHERE team_id = $1",
                                    team) == 3
        assert await until(landed, 15.0), "records lost while Postgres answered read-only"
        assert await pair.count(pair.primary, "SELECT count(*) FROM calls WHERE team_id = $1", team) == 3
        assert _sample(metrics, "toolproxy_journal_dead_letters_total") == 0
        assert await journal.dead_letters.count() == 0
    finally:
        await journal.close()
        await nc.close()
        await pool.close()


async def test_the_writer_finds_the_new_primary_when_the_old_one_answers_read_only(
        pair: PgPair, nats_url: str) -> None:
    """A DSN naming two hosts: the first was the primary and now answers read-only (a demoted
    primary, or a name still on the old node), the second has been promoted. The pool's
    connections to the first are dropped at the first read-only answer and the records land on
    the second, without anyone restarting anything."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    standby = await pair.add_standby()
    pool = await create_pool(pair.dsn(pair.primary, standby), min_size=2, max_size=4)
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, pool, metrics, retry_delay_s=0.05)
    try:
        await journal.start()
        first = call_end(team)
        await journal.record(usage=first.usage, call=first.call, events=first.events, key=first.key)

        async def on_primary() -> bool:
            return await pair.count(pair.primary, "SELECT count(*) FROM usage_records WHERE team_id = $1",
                                    team) == 1
        assert await until(on_primary, 15.0)
        await standby.promote()
        await pair.read_only(pair.primary, True)
        ends = [call_end(team) for _ in range(3)]
        for e in ends:
            await journal.record(usage=e.usage, call=e.call, events=e.events, key=e.key)

        async def on_new_primary() -> bool:
            return await pair.count(standby, "SELECT count(*) FROM usage_records WHERE team_id = $1",
                                    team) == 4
        assert await until(on_new_primary, 15.0), "the writer stayed on the read-only server"
        assert _sample(metrics, "toolproxy_journal_dead_letters_total") == 0
        assert await pair.count(pair.primary, "SELECT count(*) FROM usage_records WHERE team_id = $1",
                                team) == 1
    finally:
        await journal.close()
        await nc.close()
        await pool.close()


async def test_an_unknown_column_holds_records_back_instead_of_setting_them_aside(
        pair: PgPair, nats_url: str) -> None:
    """An error that is the deployment's (here: a column the writer needs is missing, as when
    a replica runs ahead of its migrations) refuses every record alike: held back uncounted,
    never dead-lettered, written once the schema is right."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    pool = await create_pool(pair.dsn(pair.primary), min_size=1, max_size=4)
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, pool, metrics, retry_delay_s=0.05)
    try:
        await journal.start()
        await pair.count(pair.primary, "SELECT 0 FROM (SELECT 1) x")  # connection check
        conn_sql = "ALTER TABLE usage_records RENAME COLUMN latency_ms TO latency_ms_moved"
        await _execute(pair, conn_sql)
        ends = [call_end(team) for _ in range(2)]
        for e in ends:
            await journal.record(usage=e.usage, call=e.call, events=e.events, key=e.key)

        async def refused_many_times() -> bool:
            return _sample(metrics, "toolproxy_usage_write_errors_total") >= 12
        assert await until(refused_many_times, 15.0)
        await _execute(pair, "ALTER TABLE usage_records RENAME COLUMN latency_ms_moved TO latency_ms")

        async def landed() -> bool:
            return await pair.count(pair.primary, "SELECT count(*) FROM usage_records WHERE team_id = $1",
                                    team) == 2
        assert await until(landed, 15.0)
        assert _sample(metrics, "toolproxy_journal_dead_letters_total") == 0
    finally:
        await journal.close()
        await nc.close()
        await pool.close()


async def _execute(pair: PgPair, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(pair.primary.url(), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _now() -> datetime:
    return datetime.now(timezone.utc)


async def test_any_pool_follows_the_primary_after_a_read_only_answer(pair: PgPair) -> None:
    """Not only the journal's writer: a read-only answer to any query of a pool (a governance
    route's, a tool service's) has the pool's connections replaced, and the next write goes to
    the host that is the primary now."""
    import asyncpg

    standby = await pair.add_standby()
    pool = await create_pool(pair.dsn(pair.primary, standby), min_size=2, max_size=2)
    try:
        await standby.promote()
        await pair.read_only(pair.primary, True)
        try:
            await pool.execute("CREATE TABLE follow_me (i int)")
        except asyncpg.exceptions.ReadOnlySQLTransactionError:
            pass  # one answer from the old primary (or none, if the pool had moved already)

        async def written() -> bool:
            try:
                await pool.execute("CREATE TABLE IF NOT EXISTS follow_me (i int)")
            except asyncpg.exceptions.ReadOnlySQLTransactionError:
                return False
            return True
        assert await until(written, 5.0)
        assert await pair.count(standby, "SELECT count(*) FROM pg_tables WHERE tablename = 'follow_me'") == 1
    finally:
        await pool.close()
