"""Admission control before a call is forwarded: two GCRA rate buckets (agent+tool and
team+category) and the daily quotas (team, and agent where configured), shared by every
replica. Two stores implement it — Postgres (one function call per admission) and NATS
JetStream KV (compare-and-set) — chosen with TOOLPROXY_LIMITS_STORE. Anything the limiter
cannot establish is a refusal (fail closed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Protocol

from pdp.data.quotas import Quota
from proxy.core.limits.counters import Counters
from proxy.core.limits.gcra import Rate, default_burst

# Fallbacks when the policy's obligations carry no rate. The agent+tool rate normally comes
# from the policy (category default or an override); the team+category ceiling from the
# configuration (TOOLPROXY_TEAM_RATE_PER_MINUTE), which obligations may tighten per team.
AGENT_PER_MINUTE = {"A": 600.0, "B": 120.0, "C": 30.0, "D": 5.0}
TEAM_PER_MINUTE = {"A": 6000.0, "B": 1200.0, "C": 300.0, "D": 50.0}

QuotaOf = Callable[[str, str | None], Quota | None]
OnCounted = Callable[[str, str | None, Quota, Counters], None]


@dataclass(slots=True)
class Admission:
    allowed: bool
    code: str | None = None  # rate_limited | quota_exceeded
    reason: str | None = None  # agent_tool_rate | team_category_rate | quota_<kind>
    retry_after: float = 0.0


@dataclass(frozen=True, slots=True)
class TokenReservation:
    """Tokens held against the daily token quotas in scope for a call that has not ended:
    `scopes` names the counters holding them ("" the team's, else the agent's) on `day`.
    Nothing is held (tokens 0) where no token quota applies."""

    allowed: bool
    tokens: int = 0
    day: date | None = None
    scopes: tuple[str, ...] = ()
    retry_after: float = 0.0


NO_RESERVATION = TokenReservation(True)


class LimitsUnavailable(Exception):
    """The shared limit state could not be read or written: the call is refused."""


class Limiter(Protocol):
    async def start(self) -> None: ...

    async def ensure(self) -> None:
        """Re-create what a restarted store lost (run after a reconnect)."""
        ...

    async def close(self) -> None: ...

    async def admit(self, *, team_id: str, agent_id: str, tool: str, category: str,
                    rate: dict[str, Any] | None, now: float | None = None) -> Admission: ...

    async def reserve_tokens(self, *, team_id: str, agent_id: str, tokens: int,
                             now: float | None = None) -> TokenReservation:
        """Hold `tokens` against every daily token quota in scope, all or none: refused (not
        allowed) when one cannot hold them on top of what it counts already."""
        ...

    def settle(self, *, team_id: str, agent_id: str, tokens: int, compute: float, cost: float,
               now: float | None = None, reserved: TokenReservation | None = None) -> None:
        """Add what the call consumed; with `reserved`, the held tokens are replaced by the
        real figure (on the reservation's day)."""
        ...

    async def counters(self, team_id: str, agent_id: str | None = None,
                       now: float | None = None) -> Counters: ...

    async def seed(self, team_id: str, agent_id: str | None, used: Counters,
                   now: float | None = None) -> None: ...


def utc_day(now: float) -> date:
    """The UTC date of an epoch time (the day last asked for is kept: every call asks)."""
    start, end, day = _last_day
    if start <= now < end:
        return day
    return _remember_day(now)


def _remember_day(now: float) -> date:
    global _last_day
    day = datetime.fromtimestamp(now, timezone.utc).date()
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    _last_day = (start, start + 86_400.0, day)
    return day


_last_day: tuple[float, float, date] = (0.0, 0.0, date.min)


def seconds_to_midnight(now: float) -> float:
    t = datetime.fromtimestamp(now, timezone.utc)
    nxt = datetime(t.year, t.month, t.day, tzinfo=timezone.utc) + timedelta(days=1)
    return (nxt - t).total_seconds()


def rates(category: str, rate: dict[str, Any] | None,
          team_per_minute: dict[str, float]) -> tuple[Rate, Rate]:
    """(agent+tool, team+category) rates from the decision's obligations and the ceilings."""
    rate = rate or {}
    agent = _rate(rate.get("per_minute"), rate.get("burst"), AGENT_PER_MINUTE[category])
    ceiling = team_per_minute.get(category, TEAM_PER_MINUTE[category])
    tightened = rate.get("team_per_minute")
    if isinstance(tightened, (int, float)) and 0 <= tightened < ceiling:
        ceiling = float(tightened)
    return agent, _rate(ceiling, rate.get("team_burst"), ceiling)


def _rate(per_minute: Any, burst: Any, default: float) -> Rate:
    pm = float(per_minute) if isinstance(per_minute, (int, float)) and per_minute >= 0 else default
    b = int(burst) if isinstance(burst, int) and burst >= 1 else default_burst(pm)
    return Rate(per_minute=pm, burst=b)
