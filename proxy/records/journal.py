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
from typing import Any

import asyncpg
import structlog
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from infra.db import note_failure
from infra.jetstream import Ensure, asset_missing, raise_replicas, store
from infra.nats_inbox import Inbox, Meanwhile
from pdp.decision_log import DecisionRecord
from proxy.metrics import Metrics
from proxy.records.batch_write import write_docs
from proxy.records.calls import CallRecord
from proxy.records.dead_letters import DeadLetters
from proxy.records.entry import STREAM, SUBJECT_PREFIX, Entry, call_subject, dumps, entry_doc, load_entry
from proxy.records.events import EventRecord
from proxy.records.journal_writer import CONSUMER, JournalWriter
from proxy.records.usage import UsageRecord

log = structlog.get_logger("toolproxy.journal")


def stream_config(replicas: int = 1) -> StreamConfig:
    return StreamConfig(
        name=STREAM,
        subjects=[f"{SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_age=7 * 24 * 3600,
        duplicate_window=120,
        allow_direct=True,  # a call's latest record, read by subject from any replica
        num_replicas=replicas,
    )


async def ensure_stream(js: JetStreamContext, replicas: int = 1) -> None:
    """Made if missing; else given direct reads and raised to `replicas`, from its own
    configuration (an operator's R3 stream is never scaled back to R1)."""
    try:
        info = await js.stream_info(STREAM)
    except NotFoundError:
        await js.add_stream(stream_config(replicas))
        return
    await raise_replicas(js, STREAM, replicas, info=info, allow_direct=True)


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
    """`record()` on the request path (durable before return); its JournalWriter (started here
    unless `writer=False`) drains the stream to Postgres."""

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
        replicas: int = 1,  # TOOLPROXY_JETSTREAM_REPLICAS, for the journal and its dead letters
        writer_pool: asyncpg.Pool | None = None,  # the writer's own connection (default: `pool`)
    ) -> None:
        self._nc = nc
        self._js = nc.jetstream(timeout=publish_timeout_s)
        self._inbox = Inbox(nc)  # where the stream's acknowledgements of our records come
        self._publish_timeout_s = publish_timeout_s
        self.ensure = Ensure(self._ensure)
        self._replicas = replicas
        self._pool = pool
        self._metrics = metrics
        self._fallback: list[dict[str, Any]] = []  # entries whose publish and direct write failed
        self.dead_letters = DeadLetters(self._js, replicas=replicas)
        self._writer = JournalWriter(self._js, writer_pool or pool, metrics, ensure=self.ensure,
                                     retry_fallback=self.retry_fallback,
                                     fallback_size=lambda: len(self._fallback),
                                     batch_size=batch_size, linger_s=linger_s,
                                     retry_delay_s=retry_delay_s,
                                     dead_letters=self.dead_letters) if writer else None

    async def start(self) -> None:
        await self.ensure.at_start()
        if self._writer is not None:
            self._writer.start()

    async def _ensure(self) -> None:
        await ensure_stream(self._js, self._replicas)
        await ensure_consumer(self._js)
        await self.dead_letters.ensure()

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.close()
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
            with contextlib.suppress(Exception):
                await note_failure(self._pool, exc)  # read-only: the next try finds the primary

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

    @property
    def connected(self) -> bool:
        return bool(self._nc.is_connected)

    async def latest_call(self, call_id: str) -> CallRecord | None:
        """The call's latest record still in the stream (not yet written to Postgres), or None."""
        if not self._nc.is_connected:
            return None
        try:
            return await self.call_record(call_id)
        except Exception:  # the stream is unreachable
            return None

    async def call_record(self, call_id: str) -> CallRecord | None:
        """The call's latest record still in the stream, or None when there is none; raises
        when the stream cannot be asked (for a caller that must tell the two apart)."""
        try:
            msg = await self._js.get_last_msg(STREAM, call_subject(call_id), direct=True)
        except NotFoundError:  # not there (written and acked, or never)
            if self._replicas == 1:
                return None
            # On a cluster any replica answers a direct read, and a follower may not have the
            # record its leader just acknowledged: the leader's own answer settles it.
            try:
                msg = await self._js.get_last_msg(STREAM, call_subject(call_id))
            except NotFoundError:
                return None
        try:
            return load_entry(msg.data).call
        except ValidationError:
            return None

    async def _write(self, docs: list[dict[str, Any]]) -> None:
        async with self._pool.acquire() as conn:
            self._metrics.usage_written.inc(await write_docs(conn, docs))

    async def retry_fallback(self) -> None:
        """Entries neither published nor written directly: tried again (by the writer's loop)."""
        if not self._fallback:
            return
        batch, self._fallback = self._fallback, []
        try:
            await self._write(batch)
        except Exception:
            self._fallback = batch + self._fallback
