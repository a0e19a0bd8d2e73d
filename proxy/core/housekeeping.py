"""Background duties of every replica: resolve calls a crashed replica left running (their
idempotency keys settled with them), and trim old events (idempotency keys expire by
themselves: the bucket's TTL). Each step is a conditional update: when several
replicas do the same round, each item is handled once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone
from typing import Any

import asyncpg
import structlog

from proxy.core.catalog import Catalog
from proxy.core.idempotency import IdempotencyStore
from proxy.core.outcome import HttpStatusOf, Outcome, response_body
from infra.lifecycle import cancel_and_wait
from proxy.records.events import delete_older_than, event
from proxy.records.calls import TERMINAL, CallRecord
from proxy.records.journal import Journal
from proxy.records.usage import UsageRecord

log = structlog.get_logger("toolproxy.housekeeping")

GRACE_S = 2  # past the call's deadline, in case its owner is merely slow to record it

LOST_MESSAGE = ("the proxy replica running this call stopped before recording its outcome; "
                "the tool may or may not have run. The call will not be executed again.")


# How a lost call ends: the tool may or may not have run (so it is FAILED, never run again).
LOST = Outcome(status="FAILED", code="proxy_lost", message=LOST_MESSAGE)


class Housekeeping:
    """`http_status`: how the native surface answers an outcome (a lost call's row keeps it)."""

    def __init__(self, *, pool: asyncpg.Pool, journal: Journal, catalog: Catalog,
                 idempotency: IdempotencyStore, http_status: HttpStatusOf,
                 events_retention_days: float, every_s: float, lost_after_s: float) -> None:
        self.pool = pool
        self.journal = journal
        self.catalog = catalog
        self.idempotency = idempotency
        self.lost_http_status = http_status(LOST)
        self.events_retention_days = events_retention_days
        self.every_s = every_s
        self.lost_after_s = lost_after_s
        self._task: asyncio.Task[None] | None = None
        self._rounds = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="housekeeping")

    async def close(self) -> None:
        await cancel_and_wait(self._task)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            try:
                await self.recover_lost_calls()
                self._rounds += 1
                if self._rounds % 60 == 1:  # about every five minutes
                    await delete_older_than(self.pool, self.events_retention_days)
            except Exception as exc:  # Postgres away: the next round tries again
                log.warning("housekeeping_failed", error=str(exc))

    async def recover_lost_calls(self) -> int:
        """RUNNING calls whose replica stopped heartbeating and whose deadline has passed end
        FAILED `proxy_lost`, with one usage row; an idempotent replay then gets that ending,
        never a second execution."""
        pool = self.pool
        candidates = await pool.fetch(
            """SELECT call_id FROM calls
               WHERE status = 'RUNNING' AND deadline_at < now() - make_interval(secs => $1)
                 AND (owner IS NULL OR owner NOT IN (
                       SELECT instance_id FROM proxy_instances
                       WHERE last_seen > now() - make_interval(secs => $2)))
               LIMIT 500""",
            GRACE_S, self.lost_after_s,
        )
        resolved = 0
        body_stub = response_body(LOST)  # its ids are the row's own (below)
        for c in candidates:
            if not await self._ended_nowhere_else(str(c["call_id"])):
                continue
            row = await pool.fetchrow(
                """UPDATE calls SET status = 'FAILED', http_status = $4, finished_at = now(),
                                    diagnostic = $2,
                                    response = $3::jsonb || jsonb_build_object(
                                        'call_id', call_id::text, 'decision_id', decision_id::text)
                   WHERE call_id = $1 AND status = 'RUNNING'
                   RETURNING *""",
                c["call_id"], LOST_MESSAGE, body_stub, self.lost_http_status,
            )
            if row is None:
                continue  # another replica got there first, or the owner finished it
            resolved += 1
            await self._account(row)
        if resolved:
            log.warning("lost_calls_resolved", count=resolved)
        return resolved

    async def _ended_nowhere_else(self, call_id: str) -> bool:
        """Whether the journal stream holds no ending for the call. A replica killed while its
        writer held a batch unacknowledged leaves the call's ending in the stream until it is
        redelivered (the consumer's ack wait); the client may have had its answer, so the row
        must wait for that ending rather than be resolved lost. A stream that cannot be asked
        answers False: the next round asks again."""
        if not self.journal.connected:
            return False
        try:
            record = await self.journal.call_record(call_id)
        except Exception as exc:
            log.warning("lost_call_check_failed", call_id=call_id, error=str(exc) or type(exc).__name__)
            return False
        return record is None or record.status not in TERMINAL

    async def _account(self, row: Any) -> None:
        call_id = str(row["call_id"])
        manifest = self.catalog.get(row["tool"])
        now = datetime.now(timezone.utc)
        created = row["created_at"]
        usage = UsageRecord(
            call_id=call_id, result_id=None,
            decision_id=str(row["decision_id"]) if row["decision_id"] else None,
            team_id=row["team_id"], agent_id=row["agent_id"], agent_run_id=row["agent_run_id"],
            tool=row["tool"], category=manifest.category if manifest else "?",
            action=manifest.action if manifest else "?", decision="allow", status="FAILED",
            error_code="proxy_lost", http_status=self.lost_http_status,
            latency_ms=(now - created).total_seconds() * 1000.0, started_at=created, finished_at=now,
        )
        turn_id = str(row["turn_id"]) if row["turn_id"] else None
        ev = event(row["team_id"], "agent.error", run_id=row["agent_run_id"], call_id=call_id,
                   payload={"tool": row["tool"], "status": "FAILED", "code": "proxy_lost"},
                   turn_id=turn_id)
        record = CallRecord(call_id=call_id, team_id=row["team_id"], agent_id=row["agent_id"],
                            agent_run_id=row["agent_run_id"], tool=row["tool"], status="FAILED",
                            http_status=self.lost_http_status, response=row["response"], diagnostic=LOST_MESSAGE,
                            created_at=created, finished_at=now, turn_id=turn_id)
        await self.journal.record(usage=usage, call=record, events=[ev],
                                  key=f"{call_id}:lost:{uuid.uuid4().hex[:8]}")
        if row["idempotency_key"]:
            await self.idempotency.complete_call(row["team_id"], row["idempotency_key"], call_id,
                                                 self.lost_http_status, row["response"])
