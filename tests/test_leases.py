"""Leased admissions: tokens are taken from the shared GCRA bucket before they are used, so
replicas together stay within the bucket; unused tokens go back when a lease ends."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid

import nats
import nats.js.errors
import pytest
from nats.js.api import KeyValueConfig, StorageType

from proxy.core.limits.gcra import Rate
from infra.kv import CasStore
from proxy.core.limits.leases import LEASE_S, LeasedBuckets, give_back_n, take_up_to


def test_take_up_to_takes_what_the_bucket_holds() -> None:
    r = Rate(per_minute=600, burst=10)  # one every 0.1 s
    taken, tat, _ = take_up_to(r, None, 100.0, 25)
    assert taken == 10 and tat == pytest.approx(101.0)
    taken, _, retry = take_up_to(r, tat, 100.0, 1)
    assert taken == 0 and retry == pytest.approx(0.1)
    taken, _, _ = take_up_to(r, tat, 100.25, 5)
    assert taken == 2


@pytest.fixture
async def buckets(kv_bucket):
    replicas = [LeasedBuckets(CasStore(kv_bucket)) for _ in range(2)]
    for b in replicas:
        b.start()
    try:
        yield replicas
    finally:
        for b in replicas:
            await b.close()


async def _admit(b: LeasedBuckets, rate: Rate) -> bool:
    return b.try_local("k", rate) or (await b.take("k", rate)).allowed


async def test_two_replicas_together_stay_within_the_bucket(buckets) -> None:
    rate = Rate(per_minute=600, burst=20)
    t0 = time.monotonic()
    results = await asyncio.gather(*(_admit(buckets[i % 2], rate) for i in range(300)))
    elapsed = time.monotonic() - t0
    admitted = sum(results)
    assert 20 <= admitted <= 20 + 10 * (elapsed + LEASE_S) + 1, (admitted, elapsed)


async def test_unused_leased_tokens_go_back(buckets) -> None:
    a, b = buckets
    rate = Rate(per_minute=60, burst=40)  # one a second: the burst is all there is
    # Demand on A grows its lease: it holds more tokens than it uses.
    assert all(await asyncio.gather(*(_admit(a, rate) for _ in range(10))))
    await asyncio.sleep(LEASE_S * 3)  # A's lease ends; its leftovers go back
    got = sum(await asyncio.gather(*(_admit(b, rate) for _ in range(40))))
    assert got >= 29, got  # 40 - the 10 A used (one a second may have come back meanwhile)


async def _writes(kv) -> int:
    """Writes the bucket has taken so far (its stream's last sequence)."""
    return (await kv.status()).stream_info.state.last_seq


async def test_a_quiet_key_leases_one_token_and_leaves_none_to_give_back(kv_bucket) -> None:
    """A key called less than once a lease takes one token per call: its first call's write
    holds one token's worth of time, and calls a few leases apart cost a write each, with no
    leftover for the sweeper to write back (two tokens a lease would leave one each time)."""
    rate = Rate(per_minute=60, burst=10)  # one a second: a token is a second of the bucket's time
    b = LeasedBuckets(CasStore(kv_bucket))
    b.start()
    try:
        assert await _admit(b, rate)
        held = float(await CasStore(kv_bucket).read("k") or b"0") - time.time()
        assert 0.5 < held <= 1.0, held  # one token taken (two would put it ~2 s ahead)
        before = await _writes(kv_bucket)
        for _ in range(4):
            await asyncio.sleep(LEASE_S * 2.5)  # the pattern of a quiet key: a call now and then
            assert await _admit(b, rate)
        await asyncio.sleep(LEASE_S * 3)  # the sweeper has had its turns
        assert await _writes(kv_bucket) - before == 4
    finally:
        await b.close()


async def _writes_for(kv, lease_s: float, key: str) -> tuple[int, int]:
    """Calls on one key at ~100 a second for 0.4 s, from leases of `lease_s`: (admitted, writes
    the bucket took)."""
    rate = Rate(per_minute=600_000, burst=10_000)
    b = LeasedBuckets(CasStore(kv), lease_s=lease_s)
    b.start()
    try:
        before = await _writes(kv)
        admitted = 0
        for _ in range(40):
            admitted += b.try_local(key, rate) or (await b.take(key, rate)).allowed
            await asyncio.sleep(0.01)
        return admitted, await _writes(kv) - before
    finally:
        await b.close()


async def test_a_longer_lease_answers_more_calls_from_what_it_holds(kv_bucket) -> None:
    """The lease's length (TOOLPROXY_LIMITS_LEASE_S) is what a replica may admit from a batch for:
    the same calls make fewer writes to the shared bucket from one-second leases than from the
    default's tenth of a second (0.4 s of calls outlive four of those leases, none of these)."""
    short = await _writes_for(kv_bucket, LEASE_S, "short")
    long = await _writes_for(kv_bucket, 1.0, "long")
    assert short[0] == long[0] == 40
    assert long[1] < short[1], (long, short)


async def test_the_lease_setting_is_bounded_and_reaches_the_limiter(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.01-1 s (a longer lease widens the bound by as much); the NATS store leases for it."""
    from pydantic import ValidationError

    from proxy.config import Settings
    from proxy.core.limits.stores import make_limiter

    assert Settings().limits_lease_s == LEASE_S
    monkeypatch.setenv("TOOLPROXY_LIMITS_LEASE_S", "0.5")
    assert Settings().limits_lease_s == 0.5
    for bad in (0, 1.5, -0.1):
        with pytest.raises(ValidationError):
            Settings(limits_lease_s=bad)
    nc = await nats.connect(nats_url)
    try:
        limiter = make_limiter("nats", nats=nc, pool=None, quota_of=lambda t, a: None,
                               on_counted=None, team_per_minute={}, lease_s=0.5)
        assert limiter.lease_s == 0.5  # type: ignore[attr-defined]
    finally:
        await nc.close()


async def test_the_app_leases_for_its_setting(aiohttp_client, settings) -> None:  # type: ignore[no-untyped-def]
    """TOOLPROXY_LIMITS_LEASE_S reaches the limiter the app starts (not only one built by hand)."""
    from proxy.web.admin import keys as admin_keys
    from proxy.web.app import create_app

    app = create_app(settings.model_copy(update={"limits_lease_s": 0.5}))
    await aiohttp_client(app)
    assert app[admin_keys.LIMITER].lease_s == 0.5


async def _steady(b: LeasedBuckets, rate: Rate, seconds: float, per_second: float) -> tuple[int, int]:
    """Calls one after another at about `per_second`: (admitted, those that had to wait for a
    refill because this replica's lease had nothing left)."""
    admitted = waited = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if b.try_local("k", rate):
            admitted += 1
        else:
            waited += 1
            admitted += (await b.take("k", rate)).allowed
        await asyncio.sleep(1 / per_second)
    return admitted, waited


async def test_a_busy_key_takes_its_next_batch_ahead(buckets) -> None:
    """Once demand is steady, the next batch is taken while the current one still serves: over
    ten lease lifetimes, calls wait for a refill at most a few times (they would wait once a
    lease, ten times or more, if batches were taken only when spent)."""
    rate = Rate(per_minute=600_000, burst=10_000)
    await _steady(buckets[0], rate, LEASE_S * 3, 200)  # the demand rate is learned
    admitted, waited = await _steady(buckets[0], rate, LEASE_S * 10, 200)
    assert admitted >= 100
    assert waited <= 4, waited


async def test_a_batch_taken_ahead_and_left_unused_goes_back(buckets) -> None:
    a, b = buckets
    rate = Rate(per_minute=60, burst=400)  # one a second: the burst is all there is
    used, _ = await _steady(a, rate, LEASE_S * 4, 200)  # steady: batches are taken ahead
    await asyncio.sleep(LEASE_S * 4)  # A stops; its current and ahead batches lapse and go back
    got = sum(await asyncio.gather(*(_admit(b, rate) for _ in range(400))))
    assert got >= 400 - used - 2, (got, used)


async def test_when_the_store_goes_away_calls_run_out_of_held_tokens_then_fail_closed(nats_url) -> None:
    """A batch taken ahead that fails fails no call (nobody waits for it, and its error is not
    left unretrieved); calls go on from the tokens this replica holds, and the first that needs
    a refill gets the store's error (the limiter turns it into 503 limits_unavailable)."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    name = f"test_{uuid.uuid4().hex[:12]}"
    kv = await js.create_key_value(config=KeyValueConfig(bucket=name, history=1,
                                                          storage=StorageType.MEMORY))
    b = LeasedBuckets(CasStore(kv))
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    rate = Rate(per_minute=600_000, burst=10_000)
    try:
        await _steady(b, rate, LEASE_S * 3, 200)  # demand learned: batches are taken ahead
        await js.delete_key_value(name)
        admitted = 0
        with pytest.raises(nats.js.errors.Error):  # no stream to answer the refill
            for _ in range(10_000):
                if not b.try_local("k", rate):
                    await b.take("k", rate)
                admitted += 1
                await asyncio.sleep(0.001)
        assert 0 < admitted < 10_000, admitted  # what it held, then a refill: refused
        gc.collect()
        await asyncio.sleep(0)
        assert not [c for c in reported if "never retrieved" in str(c.get("message"))], reported
    finally:
        loop.set_exception_handler(previous)
        await b.close()
        await nc.close()


async def test_a_replica_holds_at_most_half_the_burst_with_its_batch_ahead(buckets) -> None:
    """The batch taken ahead tops the lease up to half the burst, no more: the other half stays
    in the shared bucket for the other replicas (with a burst of 5 and two batches of 2, one
    replica could otherwise hold 4 and refuse another's call while its own tokens lapse)."""
    a, _ = buckets
    rate = Rate(per_minute=600_000, burst=10)  # half the burst: 5
    held: list[int] = []

    async def watch() -> None:
        while True:
            lease = a._leases.get("k")
            if lease is not None:
                held.append(lease.tokens + lease.next_tokens)
            await asyncio.sleep(0.002)

    watcher = asyncio.ensure_future(watch())
    try:
        admitted, _ = await _steady(a, rate, LEASE_S * 8, 200)  # steady: batches taken ahead
    finally:
        watcher.cancel()
    assert admitted >= 50
    assert held and max(held) <= 5, max(held)


class _SlowRead(CasStore):
    """A replica whose read of the bucket lands late (a busy host): another replica's write
    comes in between its round's start and its computation."""

    async def _get(self, key: str, deadline: float | None = None):
        await asyncio.sleep(0.2)
        return await super()._get(key, deadline)


async def test_a_round_computes_with_the_time_it_runs_at(kv_bucket) -> None:
    """Replica B starts a refill; before its read lands, A takes 4 of the bucket's 5. B's step
    then runs on A's write: with the time it runs at, the fifth token is there (with the time
    its round began at, the bucket looked 4 tokens' worth of time ahead of it and refused B)."""
    rate = Rate(per_minute=600, burst=5)  # one every 0.1 s
    a, b = LeasedBuckets(CasStore(kv_bucket)), LeasedBuckets(_SlowRead(kv_bucket))
    try:
        on_b = asyncio.ensure_future(_admit(b, rate))
        await asyncio.sleep(0.02)  # B's round has begun; its read is on its way
        assert all(await asyncio.gather(*(_admit(a, rate) for _ in range(4))))
        assert not on_b.done()
        assert await on_b
    finally:
        await a.close()
        await b.close()


async def test_a_refusal_is_checked_against_the_bucket_not_the_replicas_memory(kv_bucket) -> None:
    """B spends the bucket and is refused; another replica then gives two tokens back. B's
    next call is admitted: a refusal computed on the value B remembers (its own last write) is
    read again from the store before it stands."""
    rate = Rate(per_minute=60, burst=2)  # one a second; leases of one token
    b, other = LeasedBuckets(CasStore(kv_bucket)), CasStore(kv_bucket)
    try:
        assert await _admit(b, rate) and await _admit(b, rate)
        assert not await _admit(b, rate)
        await other.change("k", lambda raw: (
            repr(give_back_n(rate, float(raw), time.time(), 2)).encode(), None))
        assert await _admit(b, rate)
    finally:
        await b.close()
