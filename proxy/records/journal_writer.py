"""The journal's writer: a durable consumer shared by every replica drains the stream to
Postgres in batches, acknowledging only after the commit. Postgres unable to write for now
(away, stalled, read-only, not the primary, or failing every record alike) puts a batch back
uncounted, as often and as long as it takes; a record Postgres refuses for its data is tried
alone and, refused again and again, set aside whole in the dead-letter stream
(proxy/records/dead_letters.py), from which an operator replays it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson
import structlog
from nats.js import JetStreamContext
from pydantic import ValidationError

from infra.db import note_failure, read_only, refuses_the_data, unavailable
from infra.jetstream import Ensure, asset_missing, stored
from infra.lifecycle import cancel_and_wait
from proxy.metrics import Metrics
from proxy.records.batch_write import write_docs, write_raw
from proxy.records.dead_letters import DeadLetters
from proxy.records.entry import MISC_SUBJECT, STREAM, USAGE_FIRST, load_entry

log = structlog.get_logger("toolproxy.journal")

CONSUMER = "journal-writer"
_POISON_AFTER = 5  # refusals (seen by this writer) before a record is set aside
_REFUSALS_KEPT = 10_000  # records whose refusals are being counted, at most


def transient(exc: BaseException) -> bool:
    """The write is retried until Postgres takes it, and never counts against the record:
    Postgres away, going away, starting up, stalled, out of something, read-only or not the
    primary (infra.db.unavailable), and also an error that is no record's fault (an unknown
    table or column, a permission: the deployment's, refusing every record alike). Only an
    answer about the data sent (infra.db.refuses_the_data) counts as a refusal."""
    return not refuses_the_data(exc)


class JournalWriter:
    """Drains TOOLPROXY_JOURNAL to Postgres (one per replica; they share the consumer)."""

    def __init__(self, js: JetStreamContext, pool: asyncpg.Pool, metrics: Metrics, *,
                 ensure: Ensure, retry_fallback: Callable[[], Awaitable[None]],
                 fallback_size: Callable[[], int], batch_size: int, linger_s: float,
                 retry_delay_s: float, dead_letters: DeadLetters) -> None:
        self._js = js
        self._nc = js._nc  # type: ignore[attr-defined]
        self._dead_letters = dead_letters
        self._pool = pool
        self._metrics = metrics
        self.ensure = ensure
        self._retry_fallback = retry_fallback
        self._fallback_size = fallback_size
        self._batch_size = batch_size
        self._linger_s = linger_s
        self._retry_delay_s = retry_delay_s
        self._refusals: dict[int, int] = {}  # stream sequence -> times Postgres refused it
        self._stopping = False
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="journal-writer")

    async def close(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._task)
        if self._sub is not None:
            # A pull subscription left to the connection's drain would hold it for its timeout.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

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
            except Exception as exc:
                if transient(exc):
                    # Nothing is acked; everything comes back after a delay.
                    await self._held_back(readable, exc)
                    continue
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
        now_ns = time.time_ns()
        for m in msgs:
            if m.data.startswith(USAGE_FIRST):
                with contextlib.suppress(Exception):  # written already: only the metric is lost
                    self._metrics.usage_lag.observe(max(0.0, (now_ns - stored(m)[1]) / 1e9))

    async def _held_back(self, msgs: list[Any], exc: BaseException) -> None:
        """Postgres cannot write for now: the messages come back, uncounted. After a read-only
        answer the pool's connections are dropped, so the next ones go to the primary."""
        self._metrics.usage_write_errors.inc()
        error = str(exc) or type(exc).__name__
        if unavailable(exc):
            reason = "read_only" if read_only(exc) else "unavailable"
            log.warning("journal_batch_failed", size=len(msgs), reason=reason, error=error)
        else:  # every record alike: the deployment's (a migration missing, a permission)
            log.error("journal_batch_blocked", size=len(msgs), error=error)
        with contextlib.suppress(Exception):
            await note_failure(self._pool, exc)
        await self._put_back(msgs)

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
            except Exception as exc:
                if transient(exc):
                    # Postgres cannot write meanwhile: this record and the rest come back,
                    # uncounted.
                    await self._held_back(msgs[i:], exc)
                    return
                # Counted here, not by deliveries: those also grow while Postgres is away.
                refusals = self._refusals.pop(seq, 0) + 1
                if refusals >= _POISON_AFTER:
                    await self._set_aside(m, seq, refusals, exc)
                else:
                    if len(self._refusals) >= _REFUSALS_KEPT:
                        self._refusals.pop(next(iter(self._refusals)))  # the oldest
                    self._refusals[seq] = refusals
                    await m.nak(delay=self._retry_delay_s)
                continue
            self._refusals.pop(seq, None)
            await m.ack()

    async def _set_aside(self, m: Any, seq: int, refusals: int, exc: BaseException) -> None:
        """Into the dead-letter stream, and only then out of the journal: a record whose dead
        letter could not be stored stays in the journal and comes back."""
        try:
            await self._dead_letters.keep(m.subject, seq, m.data, error=str(exc) or type(exc).__name__,
                                          refusals=refusals)
        except Exception as again:
            self._refusals[seq] = refusals
            log.error("journal_dead_letter_not_stored", seq=seq, error=str(again) or type(again).__name__)
            with contextlib.suppress(Exception):
                await m.nak(delay=self._retry_delay_s)
            return
        self._metrics.journal_dead_letters.inc()
        log.error("journal_entry_dead_lettered", seq=seq, refusals=refusals,
                  deliveries=m.metadata.num_delivered, error=str(exc), subject=m.subject,
                  entry=m.data.decode(errors="replace")[:2_000])
        with contextlib.suppress(Exception):
            await m.term()

    async def _observe_depth(self) -> None:
        """Buffer depth as the stream sees it (shared by all replicas), not a local count."""
        try:
            info = await self._js.consumer_info(STREAM, CONSUMER)
        except Exception as exc:
            if asset_missing(exc):
                with contextlib.suppress(Exception):
                    await self.ensure()
            return
        depth = (info.num_pending or 0) + (info.num_ack_pending or 0) + self._fallback_size()
        self._metrics.usage_pending.set(depth)
        with contextlib.suppress(Exception):
            self._metrics.journal_dead_letters_waiting.set(await self._dead_letters.count())
