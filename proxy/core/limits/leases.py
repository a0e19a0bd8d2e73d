"""Admissions answered locally from tokens leased in batches from the shared store.

A replica that sees demand on a rate bucket takes several tokens at once from the shared GCRA
state (one compare-and-set) and hands them out locally for a short lease (L: `LEASE_S`, or
TOOLPROXY_LIMITS_LEASE_S); tokens left when the lease ends are given back. Tokens are taken from
the shared state before they are used, so every replica together never admits more than the
bucket allows — a token is only used up to L later than the shared state says it was taken, so
over any window W the calls admitted stay within rate × (W + L) + burst. A lease grows with the
demand seen (the demand rate over the last lease-length window, up to half the burst), so a
quiet key costs one round trip per call, as before, and a busy one a round trip per lease. A
busy key's next batch is taken ahead, once half of the current one (or of its time) is gone, so
its calls do not queue behind the refill's round trip; the two batches together stay within half
the burst (what the ahead batch would add beyond that, another replica's calls may need); each
batch still lives L from its taking, so the bound holds as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field

from infra.lifecycle import cancel_and_wait
from proxy.core.limits.gcra import Rate
from infra.kv import CasStore

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
    # A batch taken ahead while the current one still serves: drawn from once the current one
    # is spent or over, until its own expiry.
    next_tokens: int = 0
    next_expires: float = 0.0
    stale: int = 0  # tokens of a batch whose time ran out unused: given back at the next refill
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
        await cancel_and_wait(self._sweeper)
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
        if not _draw(lease, now):
            return False
        if (lease.refilling is None and lease.next_tokens == 0
                and lease.per_second * self._lease_s >= 2  # steady demand, not a quiet key
                and (lease.tokens * 2 <= lease.size or (lease.expires - now) * 2 <= self._lease_s)):
            lease.refilling = asyncio.ensure_future(self._refill(key, lease, ahead=True))
            lease.refilling.add_done_callback(_retrieved)
        return True

    async def take(self, key: str, rate: Rate) -> Grant:
        """A token from the shared bucket, through a (shared) refill of this replica's lease."""
        lease = self._leases.get(key)
        if lease is None or lease.rate != rate:
            if self.try_local(key, rate):
                return Grant(True)
            lease = self._leases[key]
        while True:
            if _draw(lease, time.monotonic()):  # a batch taken ahead may have landed meanwhile
                return Grant(True)
            if lease.refilling is None:
                lease.refilling = asyncio.ensure_future(self._refill(key, lease))
            grant = await asyncio.shield(lease.refilling)
            if not grant.allowed:
                return grant
            # Drawn from on the next turn; if others took this batch first, refill again (a
            # larger one: demand grew).

    def give(self, key: str) -> None:
        """Put back a token taken for a call that another check refused."""
        lease = self._leases.get(key)
        if lease is not None and time.monotonic() < lease.expires:
            lease.tokens += 1

    async def _refill(self, key: str, lease: _Lease, *, ahead: bool = False) -> Grant:
        """A new batch: into the lease when its current batch is spent or over, else (`ahead`)
        beside it. What ran out of time unused goes back in the same round."""
        try:
            now_m = time.monotonic()
            unused, lease.stale = lease.stale, 0
            if not ahead:  # the current batch is spent or over
                unused, lease.tokens = unused + lease.tokens, 0
            if lease.next_tokens and now_m >= lease.next_expires:
                unused, lease.next_tokens = unused + lease.next_tokens, 0
            cap = max(1, min(MAX_LEASE, lease.rate.burst // 2))
            # Enough for one lease at the demand seen (this window's count if it is already
            # more: a burst), with half as much again to grow, rounded to the nearest: a quiet
            # key (a call a lease or fewer) takes one token, not two whose second would mostly
            # run out unused and cost a write of its own to give back.
            expected = max(lease.per_second * self._lease_s, lease.demand)
            lease.size = max(1, min(cap, math.ceil(expected * 1.5 - 0.5)))
            # A replica holds at most half the burst, its current and next batches together:
            # the rest stays in the shared bucket for the other replicas' calls.
            want = max(0, min(lease.size, cap - lease.tokens)) if ahead else lease.size
            if want <= 0 and not unused:
                return Grant(True)

            def step(raw: bytes | None) -> tuple[bytes | None, tuple[int, float]]:
                # The clock is read each time the step runs, not once before the round: run
                # again on a value another replica has just written, a time read before that
                # write would see the bucket emptier than it is (at its edge, a token refused
                # that the bucket holds).
                now = time.time()
                tat = float(raw) if raw else None
                if unused:  # an expired lease's tokens go back before a new one is taken
                    tat = give_back_n(lease.rate, tat or now, now, unused)
                taken, new_tat, retry = take_up_to(lease.rate, tat, now, want)
                changed = taken > 0 or unused > 0
                return (repr(new_tat).encode() if changed else None), (taken, retry)

            try:
                taken, retry = await self._store.change(key, step)
            except BaseException:
                lease.stale += unused  # not given back yet: the next round tries
                raise
            expires = time.monotonic() + self._lease_s
            if ahead:
                lease.next_tokens, lease.next_expires = taken, expires
            else:
                lease.tokens, lease.expires = taken, expires
            return Grant(taken > 0, retry)
        finally:
            lease.refilling = None

    def _spawn_return(self, key: str, lease: _Lease) -> None:
        task = asyncio.ensure_future(self._return(key, lease))
        self._returning.add(task)
        task.add_done_callback(self._returning.discard)

    async def _return(self, key: str, lease: _Lease) -> None:
        n = lease.tokens + lease.next_tokens + lease.stale
        lease.tokens = lease.next_tokens = lease.stale = 0
        if n <= 0:
            return
        with contextlib.suppress(Exception):  # best effort: at worst n tokens lapse
            await self._store.change(key, lambda raw: (
                (repr(give_back_n(lease.rate, float(raw), time.time(), n)).encode() if raw else None),
                None))

    async def return_all(self) -> None:
        for key, lease in list(self._leases.items()):
            await self._return(key, lease)

    async def _sweep(self) -> None:
        """Expired leases give their tokens back; idle keys are forgotten."""
        while True:
            await asyncio.sleep(self._lease_s)
            now = time.monotonic()
            for key, lease in list(self._leases.items()):
                if lease.refilling is not None or now < max(lease.expires, lease.next_expires):
                    continue
                if lease.tokens or lease.next_tokens or lease.stale:
                    await self._return(key, lease)
                if now - lease.last_used > 10.0:
                    self._leases.pop(key, None)


def _draw(lease: _Lease, now: float) -> bool:
    """A token from the current batch, or from the batch taken ahead once the current one is
    spent or over (what the current one still held then has run out of time: stale)."""
    if lease.tokens > 0 and now < lease.expires:
        lease.tokens -= 1
        return True
    if lease.next_tokens > 0 and now < lease.next_expires:
        lease.stale += lease.tokens
        lease.tokens, lease.expires = lease.next_tokens - 1, lease.next_expires
        lease.next_tokens = 0
        return True
    return False


def _retrieved(fut: asyncio.Future[Grant]) -> None:
    """A refill taken ahead that failed is failed again by the next call that needs it; nobody
    may be waiting for this one."""
    if not fut.cancelled():
        fut.exception()
