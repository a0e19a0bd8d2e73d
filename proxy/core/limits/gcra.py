"""GCRA (the generic cell rate algorithm): a token bucket kept as one number, the theoretical
arrival time (TAT). Pure functions; the store decides where the number lives."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rate:
    """`per_minute` admissions per minute on average, up to `burst` at once."""

    per_minute: float
    burst: int

    @property
    def interval(self) -> float:  # seconds between admissions at the sustained rate
        return 60.0 / self.per_minute

    @property
    def tolerance(self) -> float:  # how far ahead of now the TAT may run
        return self.interval * (self.burst - 1)


def default_burst(per_minute: float) -> int:
    """A tenth of a minute's allowance may arrive at once (at least one call)."""
    return max(1, math.ceil(per_minute / 10))


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    tat: float  # the new TAT when allowed (else unchanged)
    retry_after: float  # seconds until one call would be admitted (0 when allowed)
    remaining: int  # calls that could be admitted right now after this one


def take(rate: Rate, tat: float | None, now: float) -> Verdict:
    if rate.per_minute <= 0:
        return Verdict(False, tat or now, math.inf, 0)
    current = now if tat is None else max(tat, now)
    allow_at = current - rate.tolerance
    if now < allow_at:
        return Verdict(False, current, allow_at - now, 0)
    new_tat = current + rate.interval
    remaining = int((now + rate.tolerance - new_tat) // rate.interval) + 1
    return Verdict(True, new_tat, 0.0, max(0, min(remaining, rate.burst - 1)))


def give_back(rate: Rate, tat: float, now: float) -> float:
    """Undo one admission (a later check refused the call)."""
    return max(now, tat - rate.interval)
