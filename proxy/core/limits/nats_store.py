"""The NATS store for limits (the default): GCRA buckets and daily counters in JetStream KV
buckets, taken with compare-and-set (infra.kv); concurrent admissions on one key are
combined into one write. No Postgres on the call path: calls keep being admitted while Postgres
is down."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import structlog
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType

from pdp.data.quotas import Quota
from infra.jetstream import Ensure, ensure_bucket, ride_out
from proxy.core.limits import keys
from proxy.core.limits.counters import Counters
from infra.kv import CasStore
from proxy.core.limits.leases import LEASE_S, Grant, LeasedBuckets
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

RATE_BUCKET = "toolproxy_rate"
_LOCAL = Grant(True)
QUOTA_BUCKET = "toolproxy_quota"


class NatsLimiter:
    def __init__(
        self,
        nc: NATS,
        quota_of: QuotaOf,
        on_counted: OnCounted | None = None,
        *,
        team_per_minute: dict[str, float] | None = None,
        timeout_s: float = 1.0,
        replicas: int = 1,
        lease_s: float = LEASE_S,
    ) -> None:
        self._nc = nc
        self._replicas = replicas
        self.lease_s = lease_s  # how long a leased token may be used (TOOLPROXY_LIMITS_LEASE_S)
        self._js = nc.jetstream(timeout=timeout_s)
        self._team_per_minute = team_per_minute or {}
        self._quota_of = quota_of
        self._on_counted = on_counted  # e.g. to publish remaining-quota gauges
        self._rates: CasStore | None = None
        self._buckets: LeasedBuckets | None = None
        self._quotas: CasStore | None = None
        self._settling: set[asyncio.Task[None]] = set()
        self.ensure = Ensure(self._ensure_buckets)

    async def start(self) -> None:
        await self.ensure.at_start()

    async def _ensure_buckets(self) -> None:
        """Rate state is worth little after a restart (buckets refill within a minute): kept in
        memory for fast acknowledgements, and re-created empty when a restarted server lost
        it. Quota counters must survive one: on disk."""
        rate_kv = await self._bucket(RATE_BUCKET, ttl=3600.0, storage=StorageType.MEMORY)
        quota_kv = await self._bucket(QUOTA_BUCKET, ttl=3 * 86400.0, storage=StorageType.FILE)
        if self._rates is None or self._quotas is None:
            ride = ride_out(self._replicas)
            self._rates = CasStore(rate_kv, on_missing=self.ensure, ride_out_s=ride)
            self._quotas = CasStore(quota_kv, on_missing=self.ensure, ride_out_s=ride)
            self._buckets = LeasedBuckets(self._rates, lease_s=self.lease_s)
            self._buckets.start()
        else:  # re-created: what was remembered and followed is gone
            self._rates.forget()
            self._quotas.forget()
            await self._rates.close()
        # A quiet agent's bucket is taken from by whichever replica (or worker) serves its
        # call: followed, this one's next take builds on the other's instead of failing first.
        await self._rates.follow()

    async def _bucket(self, name: str, ttl: float, storage: StorageType) -> Any:
        return await ensure_bucket(self._js, KeyValueConfig(
            bucket=name, history=1, ttl=ttl, storage=storage, replicas=self._replicas))

    async def close(self) -> None:
        if self._buckets is not None:
            await self._buckets.close()  # unused leased tokens go back to the shared buckets
        if self._settling:
            await asyncio.wait(self._settling, timeout=2)
        if self._rates is not None:
            await self._rates.close()

    # --- admission ------------------------------------------------------------------------

    async def admit(
        self,
        *,
        team_id: str,
        agent_id: str,
        tool: str,
        category: str,
        rate: dict[str, Any] | None,
        now: float | None = None,
    ) -> Admission:
        assert self._rates is not None and self._quotas is not None
        if not self._nc.is_connected:  # refused at once, not after a timeout per bucket
            raise LimitsUnavailable("the message bus is disconnected")
        now = time.time() if now is None else now
        agent_rate, team_rate = rates(category, rate, self._team_per_minute)
        agent_key = keys.agent_tool(team_id, agent_id, tool)
        team_key = keys.team_category(team_id, category)
        assert self._buckets is not None
        b = self._buckets
        try:
            # Usually both come from this replica's leases, without a round trip; else the
            # missing ones from the shared buckets, together.
            local_a, local_t = b.try_local(agent_key, agent_rate), b.try_local(team_key, team_rate)
            if local_a and local_t:
                a = t = _LOCAL
            elif local_a or local_t:
                a = _LOCAL if local_a else await b.take(agent_key, agent_rate)
                t = _LOCAL if local_t else await b.take(team_key, team_rate)
            else:
                a, t = await asyncio.gather(b.take(agent_key, agent_rate), b.take(team_key, team_rate))
            if not (a.allowed and t.allowed):
                if a.allowed:
                    b.give(agent_key)
                if t.allowed:
                    b.give(team_key)
                denied = (a, "agent_tool_rate") if not a.allowed else (t, "team_category_rate")
                return Admission(False, "rate_limited", denied[1], denied[0].retry_after)
            q = await self._count_invocation(team_id, agent_id, now)
            if q is not None:
                self._buckets.give(agent_key)
                self._buckets.give(team_key)
                return Admission(False, "quota_exceeded", f"quota_{q}", seconds_to_midnight(now))
        except Exception as exc:
            raise LimitsUnavailable(str(exc) or type(exc).__name__) from exc
        return Admission(True)

    def _quota_scopes(self, team_id: str, agent_id: str, now: float) -> list[tuple[str, str | None, Quota | None]]:
        """Counters are kept only where a quota exists (a quota set mid-day is seeded from the
        day's usage rollup)."""
        day = utc_day(now)
        scopes: list[tuple[str, str | None, Quota | None]] = []
        team_quota = self._quota_of(team_id, None)
        if team_quota is not None:
            scopes.append((keys.quota(day, team_id), None, team_quota))
        agent_quota = self._quota_of(team_id, agent_id)
        if agent_quota is not None:
            scopes.append((keys.quota(day, team_id, agent_id), agent_id, agent_quota))
        return scopes

    async def _uncount(self, team_id: str, agent_id: str, now: float) -> None:
        for key, _, _ in self._quota_scopes(team_id, agent_id, now):
            await self._decrement(key)

    async def _count_invocation(self, team_id: str, agent_id: str, now: float) -> str | None:
        """Count one invocation against today's counters, unless a quota is already spent."""
        scopes = self._quota_scopes(team_id, agent_id, now)
        counted: list[str] = []
        for key, who, quota in scopes:
            refusal, counters = await self._increment(key, quota)
            if quota is not None and self._on_counted is not None:
                self._on_counted(team_id, who, quota, counters)
            if refusal is not None:
                for done in counted:
                    await self._decrement(done)
                return refusal
            counted.append(key)
        return None

    async def _increment(self, key: str, quota: Quota | None) -> tuple[str | None, Counters]:
        assert self._quotas is not None

        def step(raw: bytes | None) -> tuple[bytes | None, tuple[str | None, Counters]]:
            c = Counters.load(raw)
            exhausted = c.exceeded(quota) if quota is not None else None
            if exhausted is not None:
                return None, (exhausted, c)
            c.invocations += 1
            return c.dump(), (None, c)

        return await self._quotas.change(key, step)

    async def _decrement(self, key: str) -> None:
        assert self._quotas is not None

        def step(raw: bytes | None) -> tuple[bytes | None, None]:
            c = Counters.load(raw)
            c.invocations = max(0, c.invocations - 1)
            return c.dump(), None

        with contextlib.suppress(Exception):
            await self._quotas.change(key, step)

    # --- token reservations ------------------------------------------------------------------

    async def reserve_tokens(self, *, team_id: str, agent_id: str, tokens: int,
                             now: float | None = None) -> TokenReservation:
        """Hold a call's estimated tokens on every counter with a token quota, all or none."""
        now = time.time() if now is None else now
        scopes = [(key, who, quota) for key, who, quota in self._quota_scopes(team_id, agent_id, now)
                  if quota is not None and quota.tokens is not None]
        if tokens <= 0 or not scopes:
            return NO_RESERVATION
        assert self._quotas is not None
        if not self._nc.is_connected:
            raise LimitsUnavailable("the message bus is disconnected")

        def hold(limit: int) -> Any:
            def step(raw: bytes | None) -> tuple[bytes | None, tuple[bool, Counters]]:
                c = Counters.load(raw)
                if c.tokens + tokens > limit:
                    return None, (False, c)
                c.tokens += tokens
                return c.dump(), (True, c)
            return step

        held: list[str] = []
        try:
            for key, who, quota in scopes:
                assert quota is not None and quota.tokens is not None
                fits, counters = await self._quotas.change(key, hold(quota.tokens))
                if self._on_counted is not None:
                    self._on_counted(team_id, who, quota, counters)
                if not fits:
                    await self._add([(k, -tokens) for k in held], 0.0, 0.0)
                    return TokenReservation(False, retry_after=seconds_to_midnight(now))
                held.append(key)
        except Exception as exc:
            await self._add([(k, -tokens) for k in held], 0.0, 0.0)
            raise LimitsUnavailable(str(exc) or type(exc).__name__) from exc
        return TokenReservation(True, tokens, utc_day(now),
                                tuple("" if who is None else who for _, who, _ in scopes))

    # --- after the call -------------------------------------------------------------------

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
            deltas[keys.quota(day, team_id)] = tokens
        if self._quota_of(team_id, agent_id) is not None:
            deltas[keys.quota(day, team_id, agent_id)] = tokens
        if reserved is not None and held:
            for who in reserved.scopes:
                key = keys.quota(day, team_id) if who == "" else keys.quota(day, team_id, who)
                deltas[key] = tokens - held
        if not (compute or cost):  # a reservation that was exact leaves nothing to write
            deltas = {key: delta for key, delta in deltas.items() if delta}
        if not deltas:
            return
        task = asyncio.create_task(self._add(list(deltas.items()), compute, cost))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _add(self, targets: list[tuple[str, int]], compute: float, cost: float) -> None:
        assert self._quotas is not None

        def step(tokens: int) -> Any:
            def apply(raw: bytes | None) -> tuple[bytes | None, None]:
                c = Counters.load(raw)
                c.tokens = max(0, c.tokens + tokens)
                c.compute_units += compute
                c.cost_1t += cost
                return c.dump(), None
            return apply

        for key, tokens in targets:
            try:
                await self._quotas.change(key, step(tokens))
            except Exception as exc:
                log.warning("quota_settle_failed", error=str(exc))

    async def seed(self, team_id: str, agent_id: str | None, used: Counters, now: float | None = None) -> None:
        """A quota set mid-day starts from the day's usage rollup (if no counter exists yet)."""
        assert self._quotas is not None
        day = utc_day(time.time() if now is None else now)
        key = keys.quota(day, team_id) if agent_id is None else keys.quota(day, team_id, agent_id)
        await self._quotas.change(key, lambda raw: ((used.dump() if raw is None else None), None))

    async def counters(self, team_id: str, agent_id: str | None = None, now: float | None = None) -> Counters:
        """Today's counters for a team (or agent), read fresh."""
        assert self._quotas is not None
        day = utc_day(time.time() if now is None else now)
        key = keys.quota(day, team_id) if agent_id is None else keys.quota(day, team_id, agent_id)
        return Counters.load(await self._quotas.read(key))


