"""The journal writer: a call's start and end in one batch are folded (Postgres refuses an
upsert touching a row twice), the fold merges exactly as the upsert does, ordinary traffic
never gets a batch refused, Postgres starting up never costs a record, and a record Postgres
keeps refusing is set aside after five refusals."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

import asyncpg
import nats
import nats.js.errors
import orjson
import pytest
from pydantic import ValidationError

from pdp.decision import Decision
from pdp.decision_log import decision_record
from proxy.records.calls import fold
from proxy.records.events import CHANNEL, event
from proxy.records.journal_writer import _POISON_AFTER
from proxy.records.entry import Entry, dumps, load_entry
from proxy.records.journal import Journal
from proxy.records.reads import read_call_now
from proxy.errors import DependencyUnavailable
from proxy.records.batch_write import write_entries
from proxy.metrics import Metrics
from tests.support.calls import invoke
from tests.support.infra import nats_server
from tests.support.journal_entries import call_start, ended
from tests.support.waiting import until


def test_an_entry_reads_back_as_it_was_written() -> None:
    """What the stream carries: usage first (the write-lag observer relies on it), times in
    UTC with a Z, and read back (validated) equal to what was written; garbage is refused."""
    t = datetime.now(timezone.utc)
    end = ended(call_start(str(uuid.uuid4()), "team-x", t), t)
    decision = Decision(allow=True, decision_id=str(uuid.uuid4()), engine="regopy",
                        policy_revision="r1", reasons=["allowed"])
    record = decision_record(decision, {"args": {"expr": "1+1"}, "context": {}}, team_id="team-x",
                             agent_id="a", roles=["agent"], tool="math", phase="call",
                             latency_s=0.0001, call_id=end.key)
    entry = dataclasses.replace(end, decisions=[record])
    data = dumps(entry)
    assert data.startswith(b'{"usage":{') and t.isoformat().replace("+00:00", "Z").encode() in data
    assert load_entry(data) == entry
    assert load_entry(dumps(Entry(key="k"))) == Entry(key="k")
    for bad in (b'{"key": 1}', b'{"usage": {"call_id": "x"}, "key": "k"}', b"[]"):
        with pytest.raises(ValidationError):
            load_entry(bad)


async def test_starts_and_ends_of_many_calls_in_one_batch(db_pool, team) -> None:
    t = datetime.now(timezone.utc)
    starts = [call_start(str(uuid.uuid4()), team, t) for _ in range(100)]
    ends = [ended(s, t + timedelta(milliseconds=5)) for s in starts]
    batch = [e for pair in zip(starts, ends) for e in pair]  # as the stream delivers them
    async with db_pool.acquire() as conn:
        await write_entries(conn, batch)  # one transaction; refused whole before the fold
    rows = await db_pool.fetch("SELECT status, result_id, started_at, deadline_at FROM calls "
                               "WHERE team_id = $1", team)
    assert len(rows) == 100 and {r["status"] for r in rows} == {"COMPLETED"}
    assert all(r["result_id"] is not None and r["started_at"] == t and r["deadline_at"] for r in rows)
    assert await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 100
    seqs = [r["sequence"] for r in await db_pool.fetch(
        "SELECT sequence FROM events WHERE team_id = $1 ORDER BY sequence", team)]
    assert seqs == list(range(1, 301))  # each event once, no gaps


async def test_the_fold_merges_as_the_upsert_does(db_pool, team) -> None:
    """The same records written as one batch (folded) and one by one (upserted) give the same row."""
    t = datetime.now(timezone.utc)
    cases = []
    for order in ("start_end", "end_start"):  # a late start record never undoes an ending
        s = call_start(str(uuid.uuid4()), team, t)
        e = ended(s, t + timedelta(milliseconds=5))
        seq = [s, e] if order == "start_end" else [e, s]
        cases.append(seq)
    async with db_pool.acquire() as conn:
        await write_entries(conn, cases[0])
        for entry in cases[1]:
            await write_entries(conn, [entry])
    folded = fold([e.call for e in cases[1] if e.call is not None])
    assert len(folded) == 1 and folded[0].status == "COMPLETED"
    rows = {str(r["call_id"]): r for r in await db_pool.fetch(
        "SELECT call_id, status, owner, result_id, http_status, started_at, finished_at "
        "FROM calls WHERE team_id = $1", team)}
    one, two = (rows[c[0].call.call_id] for c in cases)  # type: ignore[union-attr]
    assert (one["status"], two["status"]) == ("COMPLETED", "COMPLETED")
    assert one["started_at"] == t and one["finished_at"] is not None and two["finished_at"] is not None


async def test_ordinary_traffic_has_no_refused_batch(client, token, team, db_pool) -> None:
    tok = token(team=team)
    results = await asyncio.gather(*(invoke(client, tok, "math", {"expr": f"{i}+1"},
                                            context={"agent_run_id": "run-j"}) for i in range(60)))
    assert {s for s, _ in results} == {200}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while loop.time() < deadline:
        n = await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1 AND status = 'COMPLETED'", team)
        if n == 60:
            break
        await asyncio.sleep(0.05)
    assert n == 60
    metrics = await (await client.get("/metrics")).text()
    assert "toolproxy_journal_batches_refused_total 0.0" in metrics


class StartingUp:
    """The real pool, except that some acquisitions fail as a Postgres server that is starting
    up answers (57P03): the state right after a restart, which no test can time on a real
    server. By default the first `failures`; with `at`, the acquisitions of those numbers."""

    def __init__(self, pool: asyncpg.Pool, failures: int = 0, at: frozenset[int] = frozenset()) -> None:
        self.pool, self.failures, self.at, self.acquired = pool, failures, at, 0

    def acquire(self):  # type: ignore[no-untyped-def]
        self.acquired += 1
        if self.failures > 0 or self.acquired in self.at:
            self.failures = max(0, self.failures - 1)
            raise asyncpg.exceptions.CannotConnectNowError("the database system is starting up")
        return self.pool.acquire()


async def _writer(nats_url: str, pool: object) -> tuple[Journal, Metrics, object]:
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, pool, metrics, retry_delay_s=0.05)  # type: ignore[arg-type]
    await journal.start()
    return journal, metrics, nc


def _sample(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_postgres_starting_up_never_costs_a_record(db_pool, nats_url, team) -> None:
    """Every delivery meets Postgres starting up, more than _POISON_AFTER times: the record
    still lands (it once was set aside as if Postgres had refused it)."""
    pool = StartingUp(db_pool, failures=3 * _POISON_AFTER)
    journal, metrics, nc = await _writer(nats_url, pool)
    try:
        end = ended(call_start(str(uuid.uuid4()), team, datetime.now(timezone.utc)), datetime.now(timezone.utc))
        await journal.record(usage=end.usage, call=end.call, events=end.events, key=end.key)

        async def landed() -> bool:
            return await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 1
        await until(landed)
        assert await landed() and pool.failures == 0
        assert _sample(metrics, "toolproxy_journal_dead_letters_total") == 0
    finally:
        await journal.close()
        await nc.close()


async def test_a_record_postgres_keeps_refusing_is_set_aside(db_pool, nats_url, team) -> None:
    """A record Postgres refuses (an integer beyond its column) is set aside after five
    refusals, logged whole; the records beside it land."""
    journal, metrics, nc = await _writer(nats_url, db_pool)
    try:
        now = datetime.now(timezone.utc)
        bad, good = (ended(call_start(str(uuid.uuid4()), team, now), now) for _ in range(2))
        assert bad.usage is not None
        refused = dataclasses.replace(bad.usage, http_status=1 << 40)  # integer column
        await journal.record(usage=refused, key=bad.key)
        await journal.record(usage=good.usage, call=good.call, events=good.events, key=good.key)

        async def set_aside() -> bool:
            return _sample(metrics, "toolproxy_journal_dead_letters_total") == 1
        await until(set_aside)
        assert await set_aside()
        ids = {str(r["call_id"]) for r in await db_pool.fetch(
            "SELECT call_id FROM usage_records WHERE team_id = $1", team)}
        assert ids == {good.key}
    finally:
        await journal.close()
        await nc.close()


async def test_postgres_going_away_during_the_one_by_one_pass_loses_nothing(db_pool, nats_url, team) -> None:
    """A batch holding a record Postgres refuses is written record by record; Postgres goes
    away during that pass (the second acquisition): the rest come back, the good record lands
    and the refused one is still set aside only by its own refusals."""
    pool = StartingUp(db_pool, at=frozenset({2}))
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, pool, metrics, retry_delay_s=0.05)  # type: ignore[arg-type]
    try:
        await journal.ensure()
        now = datetime.now(timezone.utc)
        bad, good = (ended(call_start(str(uuid.uuid4()), team, now), now) for _ in range(2))
        assert bad.usage is not None and good.usage is not None
        # Both in the stream before the writer starts: its first batch holds both.
        await journal.record(usage=dataclasses.replace(bad.usage, http_status=1 << 40), key=bad.key)
        await journal.record(usage=good.usage, key=good.key)
        await journal.start()

        async def settled() -> bool:
            return _sample(metrics, "toolproxy_journal_dead_letters_total") == 1 and await db_pool.fetchval(
                "SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 1
        await until(settled)
        assert await settled() and pool.acquired > 2
        assert await db_pool.fetchval("SELECT call_id::text FROM usage_records WHERE team_id = $1", team) == good.key
    finally:
        await journal.close()
        await nc.close()


async def test_events_of_one_instant_keep_their_order_and_are_numbered_once(db_pool, team) -> None:
    """Postgres numbers the events itself: at equal times in the order they came, each event
    once however often it comes (a start record and its ending both carry the first events),
    and a later batch continues the team's numbers."""
    t = datetime.now(timezone.utc)
    call_id = str(uuid.uuid4())
    evs = [dataclasses.replace(event(team, "agent.tool.requested", call_id=call_id, payload={"i": i}),
                               time=t) for i in range(5)]
    start = Entry(events=evs[:2], key=f"{call_id}:start")
    end = Entry(events=evs, key=call_id)
    async with db_pool.acquire() as conn:
        await write_entries(conn, [start, end])
        await write_entries(conn, [end, Entry(events=[event(team, "agent.tool.started")], key="x")])
    rows = await db_pool.fetch("SELECT sequence, payload FROM events WHERE team_id = $1 "
                               "ORDER BY sequence", team)
    assert [r["sequence"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["payload"].get("i") for r in rows] == [0, 1, 2, 3, 4, None]


async def test_a_message_that_is_no_entry_is_set_aside_at_once(db_pool, nats_url, team) -> None:
    """What Postgres refuses and is not an entry at all (no JSON; a usage record without its
    fields) is set aside on the first pass, not retried; the entry beside it lands."""
    journal, metrics, nc = await _writer(nats_url, db_pool)
    try:
        good = ended(call_start(str(uuid.uuid4()), team, datetime.now(timezone.utc)), datetime.now(timezone.utc))
        js = nc.jetstream()  # type: ignore[attr-defined]
        subjects = [f"toolproxy.journal.call.{uuid.uuid4()}" for _ in range(2)]
        await js.publish(subjects[0], b"not json")
        await js.publish(subjects[1], orjson.dumps({"key": "k", "usage": {"team_id": team}}))
        await journal.record(usage=good.usage, call=good.call, events=good.events, key=good.key)

        async def gone() -> bool:  # a work queue keeps a message until it is acked or set aside
            for subject in subjects:
                try:
                    await js.get_last_msg("TOOLPROXY_JOURNAL", subject)
                    return False
                except nats.js.errors.NotFoundError:
                    pass
            return await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1",
                                          team) == 1
        await until(gone)
        assert await gone()
        assert await db_pool.fetchval("SELECT call_id::text FROM usage_records WHERE team_id = $1",
                                      team) == good.key
        assert _sample(metrics, "toolproxy_journal_dead_letters_total") == 0  # not a refusal
    finally:
        await journal.close()
        await nc.close()


async def test_listeners_hear_of_new_events_once_per_team_and_batch(db_pool, team) -> None:
    """The batch's statement notifies each team that got new events, and no team for events
    already written (a redelivered batch)."""
    heard: list[str] = []

    def hear(*args: object) -> None:
        heard.append(str(args[3]))
    listener = await db_pool.acquire()
    await listener.add_listener(CHANNEL, hear)
    try:
        other = f"{team}-b"
        entries = [ended(call_start(str(uuid.uuid4()), t_, datetime.now(timezone.utc)), datetime.now(timezone.utc))
                   for t_ in (team, team, other)]
        async with db_pool.acquire() as conn:
            await write_entries(conn, entries)
            await until(lambda: len(heard) >= 2, 5.0)
            assert sorted(heard) == sorted([team, other])
            await write_entries(conn, entries)  # nothing new
            await asyncio.sleep(0.3)
        assert sorted(heard) == sorted([team, other])
    finally:
        await listener.remove_listener(CHANNEL, hear)
        await db_pool.release(listener)


def _one_usage_row(pool: asyncpg.Pool, team: str):  # type: ignore[no-untyped-def]
    """A check for _until: the team has exactly one usage row."""
    async def check() -> bool:
        return await pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 1
    return check


async def test_the_write_lag_is_observed_for_usage_records_only(db_pool, team) -> None:
    """The lag histogram (call end to usage committed) counts entries that hold usage, not a
    call's start note. On a NATS server of its own: the session's shared stream may hold what
    an earlier test's writer left unacked, which comes back (after the consumer's ack wait) to
    whichever writer runs, and would be counted here."""
    async with nats_server() as url:
        await _count_the_write_lag(url, db_pool, team)


async def _count_the_write_lag(nats_url: str, db_pool: asyncpg.Pool, team: str) -> None:
    journal, metrics, nc = await _writer(nats_url, db_pool)
    try:
        start = call_start(str(uuid.uuid4()), team, datetime.now(timezone.utc))
        end = ended(start, datetime.now(timezone.utc))
        assert dumps(start).startswith(b'{"usage":null')
        await journal.note(start)
        await journal.record(usage=end.usage, call=end.call, events=end.events, key=end.key)

        async def written() -> bool:
            return await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1 AND "
                                          "status = 'COMPLETED'", team) == 1
        await until(written)
        await until(lambda: _sample(metrics, "toolproxy_usage_write_lag_seconds_count") >= 1)
        await asyncio.sleep(0.2)
        assert _sample(metrics, "toolproxy_usage_write_lag_seconds_count") == 1
        # In seconds, from the time the stream stored the entry (read from its delivery).
        assert 0 <= _sample(metrics, "toolproxy_usage_write_lag_seconds_sum") < 5
    finally:
        await journal.close()
        await nc.close()


async def test_the_writer_folds_a_call_whose_start_and_end_share_a_batch(db_pool, nats_url, team) -> None:
    """Both records of a call in the stream before the writer starts: its first batch holds
    them on one subject, so it reads and folds them (Postgres refuses an upsert touching a row
    twice) — one COMPLETED row, one usage row, each event once; nothing refused."""
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, db_pool, metrics, retry_delay_s=0.05)
    try:
        await journal.ensure()
        start = call_start(str(uuid.uuid4()), team, datetime.now(timezone.utc))
        end = ended(start, datetime.now(timezone.utc))
        await journal.note(start)
        await journal.record(usage=end.usage, call=end.call, events=end.events, key=end.key)
        await journal.start()
        written = _one_usage_row(db_pool, team)
        await until(written)
        assert await written()
        assert await db_pool.fetchval("SELECT status FROM calls WHERE team_id = $1", team) == "COMPLETED"
        assert await db_pool.fetchval("SELECT count(*) FROM events WHERE team_id = $1", team) == 3
        assert _sample(metrics, "toolproxy_journal_batches_refused_total") == 0
    finally:
        await journal.close()
        await nc.close()


async def test_a_journal_without_its_writer_keeps_records_in_the_stream(db_pool, nats_url, team) -> None:
    """The benchmarks' `writer` switch: records are made durable (readable from the stream by
    any replica) but nothing drains them until a writer runs; then each is written once."""
    nc = await nats.connect(nats_url)
    idle = Journal(nc, db_pool, Metrics(), writer=False)
    writer = Journal(nc, db_pool, Metrics(), retry_delay_s=0.05)
    try:
        await idle.start()
        start = call_start(str(uuid.uuid4()), team, datetime.now(timezone.utc))
        end = ended(start, datetime.now(timezone.utc))
        await idle.record(usage=end.usage, call=end.call, events=end.events, key=end.key)
        await asyncio.sleep(0.5)
        assert await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1", team) == 0
        held = await idle.latest_call(end.call.call_id)
        assert held is not None and held.status == "COMPLETED"
        await writer.start()  # the same connection, now with a writer
        written = _one_usage_row(db_pool, team)
        await until(written)
        assert await written()
        assert await db_pool.fetchval("SELECT count(*) FROM events WHERE team_id = $1", team) == 3
    finally:
        await writer.close()
        await idle.close()
        await nc.close()


async def test_a_call_only_in_the_stream_read_by_a_replica_off_the_bus_is_retried_not_404(
        db_pool, nats_url, team) -> None:
    """A call answered a moment ago whose record is still only in the stream (not yet
    written): a replica whose NATS connection is away (its server was lost, it reconnects to
    another) cannot tell, so it answers "retry shortly" (503), never "no such call" (404).
    Connected, it reads the record; a call nobody made is None (a 404) once both were asked."""
    holder_nc, reader_nc = await nats.connect(nats_url), await nats.connect(nats_url)
    holder = Journal(holder_nc, db_pool, Metrics(), writer=False)
    reader = Journal(reader_nc, db_pool, Metrics(), writer=False)
    try:
        await holder.start()
        t = datetime.now(timezone.utc)
        end = ended(call_start(str(uuid.uuid4()), team, t), t)
        await holder.record(usage=end.usage, call=end.call, events=end.events, key=end.key)
        read = await read_call_now(db_pool, reader, end.call.call_id, team)
        assert read is not None and read["status"] == "COMPLETED"
        assert await read_call_now(db_pool, reader, str(uuid.uuid4()), team) is None
        await reader_nc.close()
        with pytest.raises(DependencyUnavailable) as refused:
            await read_call_now(db_pool, reader, end.call.call_id, team)
        assert refused.value.http_status == 503 and refused.value.headers.get("Retry-After") == "1"
    finally:
        await holder.close()
        await reader.close()
        await holder_nc.close()
        if not reader_nc.is_closed:
            await reader_nc.close()


async def test_a_record_whose_caller_is_cancelled_is_made_durable_all_the_same(db_pool, team) -> None:
    """A request cancelled while its records are being made durable (its client went away,
    the proxy is stopping) still leaves them behind, once: here on the direct Postgres path
    (NATS is away), cancelled at every step of the write in turn."""
    async with nats_server() as url:
        nc = await nats.connect(url)
        journal = Journal(nc, db_pool, Metrics(), writer=False)
        await journal.start()
        await nc.close()  # from here on every record goes straight to Postgres
    try:
        t = datetime.now(timezone.utc)
        ends = [ended(call_start(str(uuid.uuid4()), team, t), t) for _ in range(12)]
        cancelled: list[int] = []
        for turns, end in enumerate(ends, start=1):
            task = asyncio.ensure_future(journal.record(
                usage=end.usage, call=end.call, events=end.events, key=end.key))
            for _ in range(turns):  # let the write get that far (1: it has just begun)
                await asyncio.sleep(0)
            if task.cancel():  # False: a quick Postgres finished the write within those turns
                with pytest.raises(asyncio.CancelledError):
                    await task
                cancelled.append(turns)
            else:
                await task
        assert cancelled[:2] == [1, 2], cancelled  # the early steps are always cut mid-write
        rows = await db_pool.fetch("SELECT call_id, count(*) AS n FROM usage_records "
                                   "WHERE team_id = $1 GROUP BY call_id", team)
        assert {str(r["call_id"]): r["n"] for r in rows} == {e.key: 1 for e in ends}
        assert await db_pool.fetchval("SELECT count(*) FROM events WHERE team_id = $1", team) == 3 * 12
    finally:
        await journal.close()
