"""Usage records: published durably to JetStream on the call path, batched into Postgres off it.

Why JetStream in between: a completed call must be billed even when Postgres is briefly down
or this replica dies right after answering. The publish is acknowledged (stored) before the
response is sent; a shared durable consumer writes batches and acks only after the commit,
and `call_id` as primary key makes redelivery harmless (exactly one row per call).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import date, datetime, timezone
from typing import Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from pydantic import BaseModel, ConfigDict

from proxy.metrics import Metrics

log = structlog.get_logger("toolproxy.usage")

STREAM = "TOOLPROXY_USAGE"
SUBJECT_PREFIX = "toolproxy.usage"
CONSUMER = "usage-writer"


class UsageRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    call_id: str
    result_id: str | None
    decision_id: str | None
    team_id: str
    agent_id: str
    agent_run_id: str | None
    tool: str
    category: str
    action: str
    decision: str  # allow | deny
    status: str
    error_code: str | None
    http_status: int
    latency_ms: float
    tokens_used: int = 0
    compute_units: float = 0.0
    cost_1t: float = 0.0
    started_at: datetime
    finished_at: datetime

    @property
    def day(self) -> date:
        return self.finished_at.astimezone(timezone.utc).date()


_INSERT = """
WITH batch AS (
    SELECT * FROM unnest(
        $1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int[],
        $14::float8[], $15::bigint[], $16::float8[], $17::float8[], $18::timestamptz[],
        $19::timestamptz[], $20::date[]
    ) AS b(call_id, result_id, decision_id, team_id, agent_id, agent_run_id, tool, category,
           action, decision, status, error_code, http_status, latency_ms, tokens_used,
           compute_units, cost_1t, started_at, finished_at, day)
),
ins AS (
    INSERT INTO usage_records
    SELECT * FROM batch
    ON CONFLICT (call_id) DO NOTHING
    RETURNING *
)
INSERT INTO usage_daily AS d (day, team_id, agent_id, tool, category, calls, invocations,
                              completed, failed, denied, tokens_used, compute_units, cost_1t,
                              latency_ms_sum)
SELECT day, team_id, agent_id, tool, min(category), count(*),
       count(*) FILTER (WHERE result_id IS NOT NULL),
       count(*) FILTER (WHERE status = 'COMPLETED'),
       count(*) FILTER (WHERE status = 'FAILED'),
       count(*) FILTER (WHERE status = 'DENIED'),
       sum(tokens_used), sum(compute_units), sum(cost_1t), sum(latency_ms)
FROM ins GROUP BY day, team_id, agent_id, tool
ON CONFLICT (day, team_id, agent_id, tool) DO UPDATE SET
    calls = d.calls + EXCLUDED.calls,
    invocations = d.invocations + EXCLUDED.invocations,
    completed = d.completed + EXCLUDED.completed,
    failed = d.failed + EXCLUDED.failed,
    denied = d.denied + EXCLUDED.denied,
    tokens_used = d.tokens_used + EXCLUDED.tokens_used,
    compute_units = d.compute_units + EXCLUDED.compute_units,
    cost_1t = d.cost_1t + EXCLUDED.cost_1t,
    latency_ms_sum = d.latency_ms_sum + EXCLUDED.latency_ms_sum
"""


async def write_batch(conn: asyncpg.Connection | asyncpg.Pool, records: list[UsageRecord]) -> None:
    """Insert records and fold only the newly inserted ones into the daily rollup (atomic)."""
    cols: list[list[Any]] = [[] for _ in range(20)]
    for r in records:
        values = (
            uuid.UUID(r.call_id),
            uuid.UUID(r.result_id) if r.result_id else None,
            uuid.UUID(r.decision_id) if r.decision_id else None,
            r.team_id, r.agent_id, r.agent_run_id, r.tool, r.category, r.action, r.decision,
            r.status, r.error_code, r.http_status, r.latency_ms, r.tokens_used,
            r.compute_units, r.cost_1t, r.started_at, r.finished_at, r.day,
        )
        for col, v in zip(cols, values):
            col.append(v)
    await conn.execute(_INSERT, *cols)


async def ensure_stream(js: JetStreamContext) -> None:
    config = StreamConfig(
        name=STREAM,
        subjects=[f"{SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_age=7 * 24 * 3600,
        duplicate_window=120,
    )
    try:
        await js.stream_info(STREAM)
    except NotFoundError:
        await js.add_stream(config)


class UsageRecorder:
    """`record()` on the call path (durable before the response); `run()` drains to Postgres."""

    def __init__(
        self,
        nc: NATS,
        pool: asyncpg.Pool,
        metrics: Metrics,
        *,
        batch_size: int = 500,
        publish_timeout_s: float = 2.0,
        linger_s: float = 0.05,
    ) -> None:
        self._nc = nc
        self._js = nc.jetstream(timeout=publish_timeout_s)
        self._pool = pool
        self._metrics = metrics
        self._batch_size = batch_size
        self._linger_s = linger_s
        self._task: asyncio.Task[None] | None = None
        self._fallback: list[UsageRecord] = []  # publish and direct write both failed
        self._stopping = False
        self._sub: Any = None

    async def start(self) -> None:
        await ensure_stream(self._js)
        await self._js.add_consumer(
            STREAM,
            ConsumerConfig(
                durable_name=CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=30,
                max_ack_pending=20_000,
            ),
        )
        self._task = asyncio.create_task(self._run(), name="usage-writer")

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
        if self._fallback:
            with contextlib.suppress(Exception):
                await write_batch(self._pool, self._fallback)
                self._fallback.clear()
            if self._fallback:
                log.error("usage_records_unwritten_at_shutdown", count=len(self._fallback))

    async def record(self, rec: UsageRecord) -> None:
        """Durable before return: JetStream ack, else a direct Postgres write, else kept in
        memory and retried (logged loudly)."""
        data = rec.model_dump_json().encode()
        try:
            await self._js.publish(
                f"{SUBJECT_PREFIX}.{rec.team_id}",
                data,
                headers={"Nats-Msg-Id": rec.call_id},
            )
            return
        except Exception as exc:
            self._metrics.nats_errors.labels(kind="usage_publish").inc()
            log.warning("usage_publish_failed", error=str(exc))
        try:
            await write_batch(self._pool, [rec])
            self._metrics.usage_written.inc()
        except Exception as exc:
            self._metrics.usage_write_errors.inc()
            log.error("usage_record_deferred", call_id=rec.call_id, error=str(exc))
            self._fallback.append(rec)

    async def _run(self) -> None:
        sub = self._sub = await self._js.pull_subscribe_bind(CONSUMER, stream=STREAM)
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
                log.warning("usage_fetch_failed", error=str(exc))
                await asyncio.sleep(0.5)
                continue
            records: list[UsageRecord] = []
            for m in msgs:
                try:
                    records.append(UsageRecord.model_validate_json(m.data))
                except Exception:
                    log.error("usage_message_invalid", seq=m.metadata.sequence.stream)
                    await m.term()
            try:
                if records:
                    await write_batch(self._pool, records)
            except Exception as exc:
                # Not acked: redelivered after ack_wait, or now via nak with a delay.
                self._metrics.usage_write_errors.inc()
                log.warning("usage_batch_failed", size=len(records), error=str(exc))
                for m in msgs:
                    with contextlib.suppress(Exception):
                        await m.nak(delay=1.0)
                await asyncio.sleep(1.0)
                continue
            now = datetime.now(timezone.utc)
            for r in records:
                self._metrics.usage_lag.observe(max(0.0, (now - r.finished_at).total_seconds()))
            self._metrics.usage_written.inc(len(records))
            for m in msgs:
                with contextlib.suppress(Exception):
                    await m.ack()
            if len(msgs) < self._batch_size:
                # A partial batch: let a few more records gather before the next round trip
                # (bounds usage lag to ~linger while cutting writes per call under load).
                await asyncio.sleep(self._linger_s)

    async def _observe_depth(self) -> None:
        """Buffer depth as the stream sees it (shared by all replicas), not a local count."""
        try:
            info = await self._js.consumer_info(STREAM, CONSUMER)
        except Exception:
            return
        depth = (info.num_pending or 0) + (info.num_ack_pending or 0) + len(self._fallback)
        self._metrics.usage_pending.set(depth)

    async def _retry_fallback(self) -> None:
        if not self._fallback:
            return
        batch, self._fallback = self._fallback, []
        try:
            await write_batch(self._pool, batch)
            self._metrics.usage_written.inc(len(batch))
        except Exception:
            self._fallback = batch + self._fallback


async def team_day_totals(pool: asyncpg.Pool, team_id: str, day: date) -> dict[str, Any]:
    row = await pool.fetchrow(
        """SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(invocations), 0) AS invocations,
                  coalesce(sum(completed), 0) AS completed, coalesce(sum(failed), 0) AS failed,
                  coalesce(sum(denied), 0) AS denied, coalesce(sum(tokens_used), 0) AS tokens_used,
                  coalesce(sum(compute_units), 0) AS compute_units,
                  coalesce(sum(cost_1t), 0) AS cost_1t
           FROM usage_daily WHERE team_id = $1 AND day = $2""",
        team_id, day,
    )
    tools = await pool.fetch(
        """SELECT tool, category, sum(calls) AS calls, sum(invocations) AS invocations,
                  sum(completed) AS completed, sum(failed) AS failed, sum(denied) AS denied,
                  sum(tokens_used) AS tokens_used, sum(compute_units) AS compute_units,
                  sum(cost_1t) AS cost_1t
           FROM usage_daily WHERE team_id = $1 AND day = $2
           GROUP BY tool, category ORDER BY tool""",
        team_id, day,
    )
    return {
        "team_id": team_id,
        "day": day.isoformat(),
        "totals": {k: _num(v) for k, v in dict(row).items()},
        "by_tool": [{k: _num(v) for k, v in dict(t).items()} for t in tools],
    }


def _num(v: Any) -> Any:
    # sum(bigint) is numeric in Postgres: hand JSON an int.
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v
