"""The Postgres store for limits (TOOLPROXY_LIMITS_STORE=postgres): both GCRA buckets and the
daily counters are checked and taken by one function call, toolproxy_admit() — one round trip.
Alone, an admission is a little cheaper than with the NATS store; under concurrency a team's
bucket row becomes a hot lock (bench/limits.py: about half the NATS store's throughput at 32
clients of one team), and admissions stop (fail closed, 503) while Postgres is down."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import asyncpg
import structlog

from proxy.core.limits import keys
from proxy.core.limits.counters import Counters
from proxy.core.limits.gcra import Rate
from proxy.core.limits.limiter import (
    NO_RESERVATION,
    Admission,
    LimitsUnavailable,
    OnCounted,
    QuotaOf,
    TokenReservation,
    rates,
    seconds_to_midnight,
    utc_day,
)

log = structlog.get_logger("toolproxy.limits")

_TIMEOUT_S = 1.0  # an admission never waits longer than this for Postgres

_ADMIT = """SELECT code, reason, retry_after FROM toolproxy_admit(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"""


def _gcra(rate: Rate) -> tuple[float | None, float]:
    """(interval, tolerance); a zero rate has no interval: it never admits."""
    if rate.per_minute <= 0:
        return None, 0.0
    return rate.interval, rate.tolerance


class PostgresLimiter:
    def __init__(self, pool: asyncpg.Pool, quota_of: QuotaOf, on_counted: OnCounted | None = None,
                 *, team_per_minute: dict[str, float] | None = None) -> None:
        self._pool = pool
        self._quota_of = quota_of
        self._on_counted = on_counted
        self._team_per_minute = team_per_minute or {}
        self._settling: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        pass

    async def ensure(self) -> None:
        pass  # Postgres keeps its tables

    async def close(self) -> None:
        if self._settling:
            await asyncio.wait(self._settling, timeout=2)

    async def admit(self, *, team_id: str, agent_id: str, tool: str, category: str,
                    rate: dict[str, Any] | None, now: float | None = None) -> Admission:
        now = time.time() if now is None else now
        agent_rate, team_rate = rates(category, rate, self._team_per_minute)
        a_int, a_tol = _gcra(agent_rate)
        t_int, t_tol = _gcra(team_rate)
        tq = self._quota_of(team_id, None)
        aq = self._quota_of(team_id, agent_id)
        try:
            row = await self._pool.fetchrow(
                _ADMIT,
                keys.agent_tool(team_id, agent_id, tool), a_int, a_tol,
                keys.team_category(team_id, category), t_int, t_tol,
                now, utc_day(now), team_id, agent_id, aq is not None,
                *_limits(tq), *_limits(aq),
                timeout=_TIMEOUT_S,
            )
        except Exception as exc:  # any failure to reach or use Postgres: refuse (fail closed)
            raise LimitsUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if self._on_counted is not None and (tq is not None or aq is not None):
            await self._report(team_id, agent_id, tq, aq, now)
        if row["code"] is None:
            return Admission(True)
        wait = row["retry_after"]
        return Admission(False, row["code"], row["reason"], math.inf if wait is None else float(wait))

    async def _report(self, team_id: str, agent_id: str, tq: Any, aq: Any, now: float) -> None:
        assert self._on_counted is not None
        for who, quota in ((None, tq), (agent_id, aq)):
            if quota is not None:
                self._on_counted(team_id, who, quota, await self.counters(team_id, who, now))

    async def reserve_tokens(self, *, team_id: str, agent_id: str, tokens: int,
                             now: float | None = None) -> TokenReservation:
        """Hold a call's estimated tokens on every counter with a token quota, all or none
        (one function call: toolproxy_reserve_tokens)."""
        now = time.time() if now is None else now
        tq = self._quota_of(team_id, None)
        aq = self._quota_of(team_id, agent_id)
        team_limit = tq.tokens if tq is not None else None
        agent_limit = aq.tokens if aq is not None else None
        if tokens <= 0 or (team_limit is None and agent_limit is None):
            return NO_RESERVATION
        day = utc_day(now)
        try:
            fits = await self._pool.fetchval(
                "SELECT toolproxy_reserve_tokens($1, $2, $3, $4, $5, $6)",
                day, team_id, agent_id, tokens, team_limit, agent_limit, timeout=_TIMEOUT_S)
        except Exception as exc:  # fail closed
            raise LimitsUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if self._on_counted is not None:
            await self._report(team_id, agent_id, tq, aq, now)
        if not fits:
            return TokenReservation(False, retry_after=seconds_to_midnight(now))
        scopes = ((("",) if team_limit is not None else ())
                  + ((agent_id,) if agent_limit is not None else ()))
        return TokenReservation(True, tokens, day, scopes)

    def settle(self, *, team_id: str, agent_id: str, tokens: int, compute: float, cost: float,
               now: float | None = None, reserved: TokenReservation | None = None) -> None:
        """Add what the call consumed to today's counters (the reservation's day, where tokens
        were held: they are replaced by the real figure), off the request path."""
        held = reserved.tokens if reserved is not None else 0
        if not (tokens or compute or cost or held):
            return
        now = time.time() if now is None else now
        day = reserved.day if reserved is not None and reserved.day is not None else utc_day(now)
        deltas: dict[str, int] = {}
        if self._quota_of(team_id, None) is not None:
            deltas[""] = tokens
        if self._quota_of(team_id, agent_id) is not None:
            deltas[agent_id] = tokens
        if reserved is not None and held:
            for who in reserved.scopes:
                deltas[who] = tokens - held
        if not (compute or cost):
            deltas = {who: delta for who, delta in deltas.items() if delta}
        if not deltas:
            return
        task = asyncio.create_task(self._add(day, team_id, list(deltas), list(deltas.values()),
                                             compute, cost))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _add(self, day: Any, team_id: str, agents: list[str], tokens: list[int],
                   compute: float, cost: float) -> None:
        try:
            # Existing counters take the (possibly negative: a reservation's excess) token
            # delta, never going below zero; missing ones are created.
            await self._pool.execute(
                """WITH d(a, t) AS (SELECT * FROM unnest($3::text[], $4::bigint[])),
                   up AS (UPDATE quota_counters q SET tokens = greatest(0, q.tokens + d.t),
                              compute_units = q.compute_units + $5, cost_1t = q.cost_1t + $6
                          FROM d WHERE q.day = $1 AND q.team_id = $2 AND q.agent_id = d.a
                          RETURNING q.agent_id)
                   INSERT INTO quota_counters AS q (day, team_id, agent_id, tokens, compute_units, cost_1t)
                   SELECT $1, $2, d.a, greatest(d.t, 0), $5, $6 FROM d
                   WHERE d.a NOT IN (SELECT agent_id FROM up)
                   ON CONFLICT (day, team_id, agent_id) DO UPDATE SET
                       tokens = q.tokens + EXCLUDED.tokens,
                       compute_units = q.compute_units + EXCLUDED.compute_units,
                       cost_1t = q.cost_1t + EXCLUDED.cost_1t""",
                day, team_id, agents, tokens, compute, cost,
            )
        except Exception as exc:
            log.warning("quota_settle_failed", error=str(exc))

    async def seed(self, team_id: str, agent_id: str | None, used: Counters, now: float | None = None) -> None:
        """A quota set mid-day starts from what the day's rollup shows as used (counters are
        only kept where a quota exists)."""
        day = utc_day(time.time() if now is None else now)
        await self._pool.execute(
            """INSERT INTO quota_counters (day, team_id, agent_id, invocations, tokens, compute_units, cost_1t)
               VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (day, team_id, agent_id) DO NOTHING""",
            day, team_id, agent_id or "", used.invocations, used.tokens, used.compute_units, used.cost_1t,
        )

    async def counters(self, team_id: str, agent_id: str | None = None,
                       now: float | None = None) -> Counters:
        day = utc_day(time.time() if now is None else now)
        row = await self._pool.fetchrow(
            """SELECT invocations, tokens, compute_units, cost_1t FROM quota_counters
               WHERE day = $1 AND team_id = $2 AND agent_id = $3""",
            day, team_id, agent_id or "",
        )
        if row is None:
            return Counters()
        return Counters(row["invocations"], row["tokens"], row["compute_units"], row["cost_1t"])


def _limits(q: Any) -> tuple[Any, Any, Any, Any]:
    if q is None:
        return None, None, None, None
    return q.invocations, q.tokens, q.compute_units, q.cost_1t
