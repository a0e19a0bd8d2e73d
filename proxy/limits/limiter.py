"""Admission control before a call is forwarded: two GCRA rate buckets (agent+tool and
team+category) and the daily quotas (team, and agent where configured), all in NATS KV so every
replica shares them. Anything the limiter cannot establish is a refusal (fail closed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

import structlog
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType

from proxy.limits import keys
from proxy.limits.gcra import Rate, Verdict, default_burst, give_back, take
from proxy.limits.kv import CasStore
from pdp.quotas import Quota
from proxy.limits.counters import Counters

log = structlog.get_logger("toolproxy.limits")

RATE_BUCKET = "toolproxy_rate"
QUOTA_BUCKET = "toolproxy_quota"

# Team-wide ceilings per category (per minute), tightened per team by the policy's
# obligations (rate.team_per_minute). The agent+tool defaults come from the policy itself.
TEAM_PER_MINUTE = {"A": 6000.0, "B": 1200.0, "C": 300.0, "D": 50.0}
AGENT_PER_MINUTE = {"A": 600.0, "B": 120.0, "C": 30.0, "D": 5.0}


@dataclass(slots=True)
class Admission:
    allowed: bool
    code: str | None = None  # rate_limited | quota_exceeded
    reason: str | None = None  # agent_tool_rate | team_category_rate | quota_<kind>
    retry_after: float = 0.0
    release: list[Callable[[], Any]] = field(default_factory=list)  # undo, if not executed


def utc_day(now: float) -> date:
    return datetime.fromtimestamp(now, timezone.utc).date()


def seconds_to_midnight(now: float) -> float:
    t = datetime.fromtimestamp(now, timezone.utc)
    nxt = datetime(t.year, t.month, t.day, tzinfo=timezone.utc) + timedelta(days=1)
    return (nxt - t).total_seconds()


class LimitsUnavailable(Exception):
    """The shared limit state could not be read or written: the call is refused."""


class Limiter:
    def __init__(
        self,
        js: JetStreamContext,
        quota_of: Callable[[str, str | None], Quota | None],
        on_counted: Callable[[str, str | None, Quota, Counters], None] | None = None,
    ) -> None:
        self._js = js
        self._quota_of = quota_of
        self._on_counted = on_counted  # e.g. to publish remaining-quota gauges
        self._rates: CasStore | None = None
        self._quotas: CasStore | None = None
        self._settling: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        rate_kv = await self._bucket(RATE_BUCKET, ttl=3600.0)
        quota_kv = await self._bucket(QUOTA_BUCKET, ttl=3 * 86400.0)
        self._rates, self._quotas = CasStore(rate_kv), CasStore(quota_kv)

    async def _bucket(self, name: str, ttl: float) -> Any:
        try:
            return await self._js.key_value(name)
        except Exception:
            return await self._js.create_key_value(
                config=KeyValueConfig(bucket=name, history=1, ttl=ttl, storage=StorageType.FILE)
            )

    async def close(self) -> None:
        if self._settling:
            await asyncio.wait(self._settling, timeout=2)

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
        now = time.time() if now is None else now
        rate = rate or {}
        agent_rate = _rate(rate.get("per_minute"), rate.get("burst"), AGENT_PER_MINUTE[category])
        team_rate = _rate(rate.get("team_per_minute"), rate.get("team_burst"), TEAM_PER_MINUTE[category])
        agent_key = keys.agent_tool(team_id, agent_id, tool)
        team_key = keys.team_category(team_id, category)
        try:
            verdicts = await asyncio.gather(
                self._take(agent_key, agent_rate, now), self._take(team_key, team_rate, now),
                return_exceptions=True,
            )
            taken = [(k, r) for (k, r), v in zip(((agent_key, agent_rate), (team_key, team_rate)), verdicts)
                     if isinstance(v, Verdict) and v.allowed]
            errors = [v for v in verdicts if isinstance(v, BaseException)]
            if errors:
                await self._give_back_rates(taken, now)
                raise LimitsUnavailable(str(errors[0])) from errors[0]
            a, t = verdicts  # type: ignore[misc]
            if not (a.allowed and t.allowed):
                await self._give_back_rates(taken, now)
                denied = [(v, why) for v, why in ((a, "agent_tool_rate"), (t, "team_category_rate"))
                          if not v.allowed]
                worst = max(denied, key=lambda d: d[0].retry_after)
                return Admission(False, "rate_limited", worst[1], worst[0].retry_after)
            refusal = await self._count_invocation(team_id, agent_id, now)
            if refusal is not None:
                await self._give_back_rates(taken, now)
                return Admission(False, "quota_exceeded", f"quota_{refusal}", seconds_to_midnight(now))
        except LimitsUnavailable:
            raise
        except Exception as exc:
            raise LimitsUnavailable(str(exc) or type(exc).__name__) from exc
        return Admission(True)

    async def _take(self, key: str, rate: Rate, now: float) -> Verdict:
        assert self._rates is not None

        def step(raw: bytes | None) -> tuple[bytes | None, Verdict]:
            v = take(rate, float(raw) if raw else None, now)
            return (repr(v.tat).encode() if v.allowed else None), v

        return await self._rates.change(key, step)

    async def _give_back_rates(self, taken: list[tuple[str, Rate]], now: float) -> None:
        assert self._rates is not None
        for key, rate in taken:
            with contextlib.suppress(Exception):  # best effort: at worst one token is lost
                await self._rates.change(
                    key, lambda raw, r=rate: ((repr(give_back(r, float(raw), now)).encode() if raw else None), None)
                )

    async def _count_invocation(self, team_id: str, agent_id: str, now: float) -> str | None:
        """Count one invocation against today's counters, unless a quota is already spent.
        The team is always counted (so a quota set mid-day sees the whole day); an agent only
        when it has a quota of its own."""
        day = utc_day(now)
        scopes: list[tuple[str, str | None, Quota | None]] = [
            (keys.quota(day, team_id), None, self._quota_of(team_id, None))
        ]
        agent_quota = self._quota_of(team_id, agent_id)
        if agent_quota is not None:
            scopes.append((keys.quota(day, team_id, agent_id), agent_id, agent_quota))
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

    # --- after the call -------------------------------------------------------------------

    def settle(self, *, team_id: str, agent_id: str, tokens: int, compute: float, cost: float,
               now: float | None = None) -> None:
        """Add what the call consumed to today's counters, off the request path."""
        if not (tokens or compute or cost):
            return
        now = time.time() if now is None else now
        day = utc_day(now)
        targets = [keys.quota(day, team_id)]
        if self._quota_of(team_id, agent_id) is not None:
            targets.append(keys.quota(day, team_id, agent_id))
        task = asyncio.create_task(self._add(targets, tokens, compute, cost))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _add(self, targets: list[str], tokens: int, compute: float, cost: float) -> None:
        assert self._quotas is not None

        def step(raw: bytes | None) -> tuple[bytes | None, None]:
            c = Counters.load(raw)
            c.tokens += tokens
            c.compute_units += compute
            c.cost_1t += cost
            return c.dump(), None

        for key in targets:
            try:
                await self._quotas.change(key, step)
            except Exception as exc:
                log.warning("quota_settle_failed", error=str(exc))

    async def counters(self, team_id: str, agent_id: str | None = None, now: float | None = None) -> Counters:
        """Today's counters for a team (or agent), read fresh."""
        assert self._quotas is not None
        day = utc_day(time.time() if now is None else now)
        key = keys.quota(day, team_id) if agent_id is None else keys.quota(day, team_id, agent_id)
        return Counters.load(await self._quotas.read(key))


def _rate(per_minute: Any, burst: Any, default: float) -> Rate:
    pm = float(per_minute) if isinstance(per_minute, (int, float)) and per_minute >= 0 else default
    b = int(burst) if isinstance(burst, int) and burst >= 1 else default_burst(pm)
    return Rate(per_minute=pm, burst=b)



