"""The journal: call and decision records made durable in JetStream on the request path, then
written to Postgres in batches off it.

Why JetStream in between: a completed call must be billed, and every decision logged, even
when Postgres is briefly down or this replica dies right after answering. A record is stored
(publish acknowledged) before the response is sent; a durable consumer shared by all replicas
writes batches in one transaction and acks only after the commit. Primary keys (call_id,
decision_id) make redelivery harmless: exactly one row each.

A call's records travel on a subject of their own (`toolproxy.journal.call.<call_id>`), so
until the writer has committed it, any replica reads a call's latest state straight from the
stream (read your own writes). If NATS is down, records go to Postgres directly; if the
server lost the stream or the consumer, they are re-created (after a reconnect, or on the
first error that says so).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from pydantic import TypeAdapter, ValidationError

from pdp.decision_log import DecisionRecord, decisions_ctes
from proxy.calls import CallRecord, calls_ctes, fold_docs
from proxy.events import EVENTS_NOTIFY, EventRecord, events_ctes
from proxy.inbox import Inbox, Meanwhile
from proxy.jetstream import Ensure, asset_missing, store
from proxy.metrics import Metrics
from proxy.usage import UsageRecord, usage_ctes

log = structlog.get_logger("toolproxy.journal")

STREAM = "TOOLPROXY_JOURNAL"
SUBJECT_PREFIX = "toolproxy.journal"
CONSUMER = "journal-writer"
_POISON_AFTER = 5  # refusals (seen by this writer) before a record is set aside
_REFUSALS_KEPT = 10_000  # records whose refusals are being counted, at most

# Postgres away, going away, starting up or momentarily out of something: the write is retried
# until Postgres answers, and never counts against the record (AdminShutdownError and
# CannotConnectNowError are "operator intervention" errors, not connection errors, in asyncpg).
TRANSIENT = (
    OSError, asyncio.TimeoutError,
    asyncpg.exceptions.InterfaceError,  # the connection is gone
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, crashed
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full
    asyncpg.exceptions.TransactionRollbackError,  # deadlock, serialization failure
)


@dataclass(kw_only=True)
class Entry:
    """One journal message: what a request left behind — a call's usage record, its row, the
    decisions taken and the events emitted (any of them). The proxy builds it from values it
    made or checked itself and writes it with `dumps` (orjson, several times cheaper than a
    pydantic model's construction and dump); whatever reads one back validates it
    (`load_entry`)."""

    usage: UsageRecord | None = None
    call: CallRecord | None = None
    decisions: list[DecisionRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    key: str  # deduplication id

    @property
    def subject(self) -> str:
        call_id = self.call.call_id if self.call is not None else (
            self.usage.call_id if self.usage is not None else None)
        return call_subject(call_id) if call_id is not None else MISC_SUBJECT


_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)
_USAGE_FIRST = b'{"usage":{'  # how an entry with a usage record begins (see _observe_lag)
MISC_SUBJECT = f"{SUBJECT_PREFIX}.misc"  # entries of no call (decisions of a listing)


def call_subject(call_id: str) -> str:
    return f"{SUBJECT_PREFIX}.call.{call_id}"


def dumps(entry: Entry) -> bytes:
    """An entry as the stream carries it: JSON, its fields in declaration order (`usage`
    first), times in RFC 3339 with a Z."""
    return orjson.dumps(entry, option=orjson.OPT_UTC_Z)


def load_entry(data: bytes | str) -> Entry:
    """An entry read back from the stream, validated (ValidationError if it is none)."""
    return _ENTRY.validate_json(data)


def entry_doc(entry: Entry) -> dict[str, Any]:
    """An entry in its JSON form, as the writer reads it from the stream."""
    doc: dict[str, Any] = orjson.loads(dumps(entry))
    return doc


def _array(part: str) -> str:
    return f"jsonb_array_elements(CASE WHEN jsonb_typeof(j.e->'{part}') = 'array' THEN j.e->'{part}' ELSE '[]' END)"


# A batch of entries in one statement (one round trip, one implicit transaction): Postgres
# reads the entries' JSON itself, nothing is decoded or encoded value by value here. It
# refuses the whole batch if any field does not fit its column.
_WRITE = f"""
WITH journal AS (
    SELECT a.e, a.idx FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS a(e, idx)
),
{usage_ctes("SELECT j.e->'usage' AS x FROM journal j WHERE jsonb_typeof(j.e->'usage') = 'object'")},
{calls_ctes("SELECT j.e->'call' AS x FROM journal j WHERE jsonb_typeof(j.e->'call') = 'object'")},
{decisions_ctes(f"SELECT d.x FROM journal j, {_array('decisions')} AS d(x)")},
{events_ctes(f"SELECT v.x, j.idx AS o1, v.i AS o2 FROM journal j, {_array('events')} WITH ORDINALITY AS v(x, i)")}
SELECT (SELECT count(*) FROM usage_new) AS usage, {EVENTS_NOTIFY} AS teams_notified
"""


async def write_raw(conn: asyncpg.Connection, messages: list[bytes]) -> int:
    """Journal messages as they came (JSON entries; no call twice): the usage records that
    were new."""
    row = await conn.fetchrow(_WRITE, (b"[" + b",".join(messages) + b"]").decode())
    assert row is not None
    return int(row["usage"])


async def write_docs(conn: asyncpg.Connection, docs: list[dict[str, Any]]) -> int:
    """Entries in their JSON form, a call's records folded into one first."""
    calls = fold_docs([d["call"] for d in docs if d.get("call")])
    if len(calls) < sum(1 for d in docs if d.get("call")):
        docs = [*({k: v for k, v in d.items() if k != "call"} for d in docs), *({"call": c} for c in calls)]
    return await write_raw(conn, [orjson.dumps(d) for d in docs])


async def write_entries(conn: asyncpg.Connection, entries: list[Entry]) -> int:
    return await write_docs(conn, [entry_doc(e) for e in entries])


def stream_config() -> StreamConfig:
    return StreamConfig(
        name=STREAM,
        subjects=[f"{SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_age=7 * 24 * 3600,
        duplicate_window=120,
        allow_direct=True,  # a call's latest record, read by subject from any replica
    )


async def ensure_stream(js: JetStreamContext) -> None:
    config = stream_config()
    try:
        info = await js.stream_info(STREAM)
    except NotFoundError:
        await js.add_stream(config)
        return
    if not info.config.allow_direct:
        await js.update_stream(config)


async def ensure_consumer(js: JetStreamContext) -> None:
    await js.add_consumer(  # idempotent with the same configuration
        STREAM,
        ConsumerConfig(
            durable_name=CONSUMER,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=30,
            max_ack_pending=20_000,
        ),
    )


class Journal:
    """`record()` on the request path (durable before return); `_run()` drains to Postgres."""

    def __init__(
        self,
        nc: NATS,
        pool: asyncpg.Pool,
        metrics: Metrics,
        *,
        batch_size: int = 200,
        publish_timeout_s: float = 1.0,
        linger_s: float = 0.05,
        retry_delay_s: float = 1.0,  # before a record Postgres did not take comes back
        writer: bool = True,  # False only in benchmarks: records kept in JetStream, not drained
    ) -> None:
        self._nc = nc
        self._js = nc.jetstream(timeout=publish_timeout_s)
        self._inbox = Inbox(nc)  # where the stream's acknowledgements of our records come
        self._publish_timeout_s = publish_timeout_s
        self.ensure = Ensure(self._ensure)
        self._pool = pool
        self._metrics = metrics
        self._batch_size = batch_size
        self._linger_s = linger_s
        self._retry_delay_s = retry_delay_s
        self._task: asyncio.Task[None] | None = None
        self._fallback: list[dict[str, Any]] = []  # entries whose publish and direct write failed
        self._refusals: dict[int, int] = {}  # stream sequence -> times Postgres refused it
        self._stopping = False
        self._sub: Any = None
        self._writer = writer

    async def start(self) -> None:
        await self.ensure.at_start()
        if self._writer:
            self._task = asyncio.create_task(self._run(), name="journal-writer")

    async def _ensure(self) -> None:
        await ensure_stream(self._js)
        await ensure_consumer(self._js)

    async def close(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sub is not None:
            # A pull subscription left to the connection's drain would hold it for its timeout.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        await self._inbox.close()
        if self._fallback:
            with contextlib.suppress(Exception):
                await self._write(self._fallback)
                self._fallback.clear()
            if self._fallback:
                log.error("journal_entries_unwritten_at_shutdown", count=len(self._fallback))

    async def note(self, entry: Entry) -> None:
        """Best effort, no round trip (a call's start: its RUNNING row and first events).
        JetStream stores it like any other entry; nothing waits for the acknowledgement."""
        if not self._nc.is_connected:
            return
        try:
            await self._nc.publish(entry.subject, dumps(entry),
                                   headers={"Nats-Msg-Id": entry.key})
        except Exception as exc:
            log.warning("journal_note_failed", error=str(exc))

    async def record(
        self,
        *,
        usage: UsageRecord | None = None,
        decisions: list[DecisionRecord] | None = None,
        call: CallRecord | None = None,
        events: list[EventRecord] | None = None,
        key: str | None = None,
        meanwhile: Meanwhile | None = None,
    ) -> None:
        """Durable before return: JetStream ack, else a direct Postgres write, else kept in
        memory and retried (logged loudly: only a crash in that state could lose it). Also
        when the caller is cancelled meanwhile (its client went away, or the proxy is
        stopping): the entry is then made durable in a task of its own before the
        cancellation goes on. Doing it twice is harmless: the stream drops a second message
        with the same id, and Postgres keeps one row per record. `meanwhile` runs while the
        stream stores the entry, if it is published (the caller finishes it)."""
        decisions = decisions or []
        events = events or []
        if usage is None and call is None and not decisions and not events:
            return
        key = key or (usage.call_id if usage is not None else
                      decisions[0].decision_id if decisions else events[0].event_id)
        entry = Entry(usage=usage, call=call, decisions=decisions, events=events, key=key)
        try:
            await self._make_durable(entry, meanwhile)
        except asyncio.CancelledError:
            await asyncio.shield(self._make_durable(entry))
            raise

    async def _make_durable(self, entry: Entry, meanwhile: Meanwhile | None = None) -> None:
        if self._nc.is_connected and await self._publish(entry, meanwhile):
            return
        doc = entry_doc(entry)
        try:
            await self._write([doc])
        except Exception as exc:
            self._metrics.usage_write_errors.inc()
            log.error("journal_entry_deferred", key=entry.key, error=str(exc))
            self._fallback.append(doc)

    async def _publish(self, entry: Entry, meanwhile: Meanwhile | None = None) -> bool:
        data = dumps(entry)
        for attempt in (1, 2):
            try:
                await store(self._inbox, entry.subject, data, msg_id=entry.key,
                            timeout_s=self._publish_timeout_s,
                            meanwhile=meanwhile if attempt == 1 else None)
                return True
            except Exception as exc:
                self._metrics.nats_errors.labels(kind="journal_publish").inc()
                if attempt == 1 and asset_missing(exc):
                    log.warning("journal_stream_missing", error=str(exc))
                    try:
                        await self.ensure()
                    except Exception as again:
                        log.warning("journal_ensure_failed", error=str(again))
                        return False
                    continue
                log.warning("journal_publish_failed", error=str(exc) or type(exc).__name__)
        return False

    async def latest_call(self, call_id: str) -> CallRecord | None:
        """The call's latest record still in the stream (not yet written to Postgres), or None."""
        if not self._nc.is_connected:
            return None
        try:
            msg = await self._js.get_last_msg(STREAM, call_subject(call_id), direct=True)
        except Exception:  # not there (written and acked), or the stream is unreachable
            return None
        try:
            return load_entry(msg.data).call
        except ValidationError:
            return None

    async def _write(self, docs: list[dict[str, Any]]) -> None:
        async with self._pool.acquire() as conn:
            self._metrics.usage_written.inc(await write_docs(conn, docs))

    async def _write_batch(self, msgs: list[Any]) -> None:
        """As they came, unless a call has two records here (its start and its end): then
        read, and the call's records folded into one."""
        subjects = [m.subject for m in msgs if m.subject != MISC_SUBJECT]
        if len(set(subjects)) < len(subjects):
            await self._write([orjson.loads(m.data) for m in msgs])
            return
        async with self._pool.acquire() as conn:
            self._metrics.usage_written.inc(await write_raw(conn, [m.data for m in msgs]))

    async def _bind(self) -> Any:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        self._sub = await self._js.pull_subscribe_bind(CONSUMER, stream=STREAM)
        return self._sub

    async def _run(self) -> None:
        sub = await self._bind()
        loop = asyncio.get_running_loop()
        next_depth = 0.0
        while not self._stopping:
            await self._retry_fallback()
            if loop.time() >= next_depth:
                next_depth = loop.time() + 5.0
                await self._observe_depth()
            try:
                msgs = await sub.fetch(self._batch_size, timeout=1.0)
            except asyncio.TimeoutError:
                continue
            except Exception as exc:
                log.warning("journal_fetch_failed", error=str(exc) or type(exc).__name__)
                await asyncio.sleep(0.25)
                if self._nc.is_connected:
                    # The server may have lost the stream or the consumer: ensure, bind again.
                    try:
                        await self.ensure()
                        sub = await self._bind()
                    except Exception as again:
                        log.warning("journal_rebind_failed", error=str(again) or type(again).__name__)
                continue
            # Read by Postgres as they are: a batch holding a message that is no entry is
            # refused whole, and the one-by-one pass sets that message aside.
            readable = list(msgs)
            try:
                await self._write_batch(readable)
            except TRANSIENT as exc:
                # Postgres away: nothing is acked; everything comes back after a delay.
                self._metrics.usage_write_errors.inc()
                log.warning("journal_batch_failed", size=len(readable), error=str(exc) or type(exc).__name__)
                await self._put_back(readable)
                continue
            except Exception as exc:
                # A record Postgres refuses must not block the others: write one by one.
                self._metrics.usage_write_errors.inc()
                self._metrics.journal_refused.inc()
                log.warning("journal_batch_refused", size=len(readable), error=str(exc))
                await self._one_by_one(readable)
                continue
            self._observe_lag(readable)
            for m in readable:
                with contextlib.suppress(Exception):
                    await m.ack()
            if len(msgs) < self._batch_size:
                # A partial batch: let a few more records gather before the next round trip
                # (bounds the write lag to ~linger while cutting writes per call under load).
                await asyncio.sleep(self._linger_s)

    async def _invalid(self, m: Any) -> None:
        log.error("journal_message_invalid", seq=m.metadata.sequence.stream,
                  entry=m.data.decode(errors="replace")[:2_000])
        with contextlib.suppress(Exception):
            await m.term()

    def _observe_lag(self, msgs: list[Any]) -> None:
        """For each usage record: from its arrival in the stream (its call's end, within the
        publish) to now, just after the commit. An entry holds usage when its JSON starts so:
        `usage` is Entry's first field, and `dumps` writes it first, without spaces."""
        now = datetime.now(timezone.utc)
        for m in msgs:
            if m.data.startswith(_USAGE_FIRST):
                with contextlib.suppress(Exception):  # written already: only the metric is lost
                    self._metrics.usage_lag.observe(max(0.0, (now - m.metadata.timestamp).total_seconds()))

    async def _put_back(self, msgs: list[Any]) -> None:
        """Nothing acked: every message comes back after a delay (Postgres is away)."""
        for m in msgs:
            with contextlib.suppress(Exception):
                await m.nak(delay=self._retry_delay_s)
        await asyncio.sleep(self._retry_delay_s)

    async def _one_by_one(self, msgs: list[Any]) -> None:
        for i, m in enumerate(msgs):
            seq = m.metadata.sequence.stream
            try:
                load_entry(m.data)  # what Postgres refuses may not be an entry
            except ValidationError:
                await self._invalid(m)
                continue
            try:
                await self._write_batch([m])
            except TRANSIENT as exc:
                # Postgres went away meanwhile: this record and the rest come back, uncounted.
                log.warning("journal_batch_failed", size=len(msgs) - i, error=str(exc) or type(exc).__name__)
                await self._put_back(msgs[i:])
                return
            except Exception as exc:
                # Counted here, not by deliveries: those also grow while Postgres is away.
                refusals = self._refusals.pop(seq, 0) + 1
                if refusals >= _POISON_AFTER:
                    # Kept in the log in full so an operator can replay it; counted as an alert.
                    self._metrics.journal_dead_letters.inc()
                    log.error("journal_entry_dead_lettered", refusals=refusals,
                              deliveries=m.metadata.num_delivered, error=str(exc),
                              entry=m.data.decode(errors="replace")[:20_000])
                    await m.term()
                else:
                    if len(self._refusals) >= _REFUSALS_KEPT:
                        self._refusals.pop(next(iter(self._refusals)))  # the oldest
                    self._refusals[seq] = refusals
                    await m.nak(delay=self._retry_delay_s)
                continue
            self._refusals.pop(seq, None)
            await m.ack()

    async def _observe_depth(self) -> None:
        """Buffer depth as the stream sees it (shared by all replicas), not a local count."""
        try:
            info = await self._js.consumer_info(STREAM, CONSUMER)
        except Exception as exc:
            if asset_missing(exc):
                with contextlib.suppress(Exception):
                    await self.ensure()
            return
        depth = (info.num_pending or 0) + (info.num_ack_pending or 0) + len(self._fallback)
        self._metrics.usage_pending.set(depth)

    async def _retry_fallback(self) -> None:
        if not self._fallback:
            return
        batch, self._fallback = self._fallback, []
        try:
            await self._write(batch)
        except Exception:
            self._fallback = batch + self._fallback
