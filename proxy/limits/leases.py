"""Admissions answered locally from tokens leased in batches from the shared store.

A replica that sees demand on a rate bucket takes several tokens at once from the shared GCRA
state (one compare-and-set) and hands them out locally for a short lease (`LEASE_S`); tokens
left when the lease ends are given back. Tokens are taken from the shared state before they are
used, so every replica together never admits more than the bucket allows — a token is only
used up to `LEASE_S` later than the shared state says it was taken, so over any window W the
calls admitted stay within rate × (W + LEASE_S) + burst. A lease grows with the demand seen
(the demand rate over the last lease-length window, up to half the burst), so a quiet key
costs one round trip per call, as before, and a busy one a round trip per lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field

from proxy.limits.gcra import Rate
from proxy.limits.kv import CasStore

LEASE_S = 0.1
MAX_LEASE = 1000


@dataclass(slots=True)
class Grant:
    allowed: bool
    retry_after: float = 0.0


def take_up_to(rate: Rate, tat: float | None, now: float, n: int) -> tuple[int, float, float]:
    """Up to `n` tokens from a GCRA bucket: (taken, new TAT, retry_after when none)."""
    if rate.per_minute <= 0:
        return 0, tat or now, math.inf
    current = now if tat is None else max(tat, now)
    available = math.floor((now + rate.tolerance - current) / rate.interval + 1e-9) + 1
    taken = max(0, min(n, available))
    if taken == 0:
        return 0, current, current - rate.tolerance - now
    return taken, current + taken * rate.interval, 0.0


def give_back_n(rate: Rate, tat: float, now: float, n: int) -> float:
    return max(now, tat - n * rate.interval)


@dataclass(slots=True)
class _Lease:
    rate: Rate
    tokens: int = 0
    expires: float = 0.0
    demand: int = 0  # admissions asked for since `window_start`
    window_start: float = field(default_factory=time.monotonic)
    per_second: float = 0.0  # the demand rate seen over the last window
    size: int = 1  # how many to take at the next refill
    refilling: asyncio.Future[Grant] | None = None
    waiting: int = 0
    last_used: float = field(default_factory=time.monotonic)


class LeasedBuckets:
    """GCRA buckets in a CasStore, admitted from local leases."""

    def __init__(self, store: CasStore, *, lease_s: float = LEASE_S) -> None:
        self._store = store
        self._lease_s = lease_s
        self._leases: dict[str, _Lease] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._returning: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self.return_all()

    def try_local(self, key: str, rate: Rate) -> bool:
        """Take a token from this replica's lease, if it holds one (no round trip). Counts the
        demand either way; on False, `take` gets one from the shared bucket."""
        lease = self._leases.get(key)
        if lease is None or lease.rate != rate:
            if lease is not None:  # the rate changed (an override): the old lease goes back
                self._spawn_return(key, lease)
            lease = self._leases[key] = _Lease(rate)
        now = time.monotonic()
        lease.demand += 1
        lease.last_used = now
        elapsed = now - lease.window_start
        if elapsed >= self._lease_s:  # the demand rate, measured over windows of a lease's length
            lease.per_second = lease.demand / elapsed
            lease.demand, lease.window_start = 0, now
        if lease.tokens > 0 and now < lease.expires:
            lease.tokens -= 1
            return True
        return False

    async def take(self, key: str, rate: Rate) -> Grant:
        """A token from the shared bucket, through a (shared) refill of this replica's lease."""
        lease = self._leases.get(key)
        if lease is None or lease.rate != rate:
            if self.try_local(key, rate):
                return Grant(True)
            lease = self._leases[key]
        while True:
            if lease.refilling is None:
                lease.refilling = asyncio.ensure_future(self._refill(key, lease))
            grant = await asyncio.shield(lease.refilling)
            if not grant.allowed:
                return grant
            if lease.tokens > 0:
                lease.tokens -= 1
                return Grant(True)
            # Others took this batch first: refill again (a larger one, demand grew).

    def give(self, key: str) -> None:
        """Put back a token taken for a call that another check refused."""
        lease = self._leases.get(key)
        if lease is not None and time.monotonic() < lease.expires:
            lease.tokens += 1

    async def _refill(self, key: str, lease: _Lease) -> Grant:
        try:
            unused = lease.tokens
            cap = max(1, min(MAX_LEASE, lease.rate.burst // 2))
            # Enough for one lease at the demand seen (this window's count if it is already
            # more: a burst), with room to grow.
            expected = max(lease.per_second * self._lease_s, lease.demand)
            lease.size = max(1, min(cap, math.ceil(expected * 1.5)))
            want = lease.size
            now = time.time()

            def step(raw: bytes | None) -> tuple[bytes | None, tuple[int, float]]:
                tat = float(raw) if raw else None
                if unused:  # an expired lease's tokens go back before a new one is taken
                    tat = give_back_n(lease.rate, tat or now, now, unused)
                taken, new_tat, retry = take_up_to(lease.rate, tat, now, want)
                changed = taken > 0 or unused > 0
                return (repr(new_tat).encode() if changed else None), (taken, retry)

            taken, retry = await self._store.change(key, step)
            lease.tokens = taken
            lease.expires = time.monotonic() + self._lease_s
            return Grant(taken > 0, retry)
        finally:
            lease.refilling = None

    def _spawn_return(self, key: str, lease: _Lease) -> None:
        task = asyncio.ensure_future(self._return(key, lease))
        self._returning.add(task)
        task.add_done_callback(self._returning.discard)

    async def _return(self, key: str, lease: _Lease) -> None:
        n, lease.tokens = lease.tokens, 0
        if n <= 0:
            return
        now = time.time()
        with contextlib.suppress(Exception):  # best effort: at worst n tokens lapse
            await self._store.change(key, lambda raw: (
                (repr(give_back_n(lease.rate, float(raw), now, n)).encode() if raw else None), None))

    async def return_all(self) -> None:
        for key, lease in list(self._leases.items()):
            await self._return(key, lease)

    async def _sweep(self) -> None:
        """Expired leases give their tokens back; idle keys are forgotten."""
        while True:
            await asyncio.sleep(self._lease_s)
            now = time.monotonic()
            for key, lease in list(self._leases.items()):
                if lease.refilling is not None or now < lease.expires:
                    continue
                if lease.tokens:
                    await self._return(key, lease)
                if now - lease.last_used > 10.0:
                    self._leases.pop(key, None)
