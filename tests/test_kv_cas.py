"""Compare-and-set on a real JetStream KV bucket when replies are late: a write whose
acknowledgement is lost is applied once, not twice; timeouts are ridden out (as during a leader
election) for a bounded time, then the change fails closed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout

from infra.kv import CasStore


class LateReplies:
    """The store's inbox, whose next `lose` writes reach the server (`deliver`) or not, and
    whose acknowledgements never reach the caller: what a reply past the timeout is."""

    def __init__(self, inbox: Any, lose: int, deliver: bool) -> None:
        self._inbox, self.lose, self.deliver, self.sent = inbox, lose, deliver, 0

    async def request(self, subject: str, payload: bytes, **kw: Any) -> Any:
        self.sent += 1
        if self.lose > 0:
            self.lose -= 1
            if self.deliver:
                with contextlib.suppress(Exception):  # whatever the server said, nobody hears it
                    await self._inbox.request(subject, payload, **kw)
            raise NatsTimeout
        return await self._inbox.request(subject, payload, **kw)


def increment(raw: bytes | None) -> tuple[bytes, int]:
    n = int(raw or b"0") + 1
    return str(n).encode(), n


async def test_a_write_whose_acknowledgement_was_lost_is_applied_once(kv_bucket) -> None:
    store = CasStore(kv_bucket)
    assert await store.change("k", increment) == 1
    store._inbox = late = LateReplies(store._inbox, lose=1, deliver=True)
    assert await store.change("k", increment) == 2  # the same message again: a duplicate
    # Servers before 2.11 dedupe the same copy; later ones first refuse its stale revision, and
    # dedupe the copy recomputed on the value read again.
    assert late.sent in (2, 3)
    assert await store.read("k") == b"2"
    assert await CasStore(kv_bucket).change("k", increment) == 3  # and the next write builds on it


async def test_a_write_that_never_arrived_is_sent_again(kv_bucket) -> None:
    store = CasStore(kv_bucket)
    store._inbox = late = LateReplies(store._inbox, lose=1, deliver=False)
    assert await store.change("k", increment) == 1
    assert late.sent == 2 and await store.read("k") == b"1"


async def test_timeouts_are_ridden_out_under_one_message_id(kv_bucket) -> None:
    """As while a replicated bucket elects a leader: each copy may land, all count once."""
    store = CasStore(kv_bucket)
    store._inbox = late = LateReplies(store._inbox, lose=3, deliver=True)
    assert await store.change("k", increment) == 1
    assert late.sent >= 4 and await store.read("k") == b"1"


async def test_past_the_ride_out_the_change_fails_and_applies_at_most_once(kv_bucket) -> None:
    store = CasStore(kv_bucket, ride_out_s=0.3)
    store._inbox = LateReplies(store._inbox, lose=1000, deliver=True)
    with pytest.raises(asyncio.TimeoutError):
        await store.change("k", increment)
    assert await store.read("k") == b"1"  # every copy carried one message id: stored once


async def test_writers_that_contend_each_count_once(kv_bucket) -> None:
    stores = [CasStore(kv_bucket) for _ in range(3)]
    results = await asyncio.gather(*(stores[i % 3].change("k", increment) for i in range(60)))
    assert sorted(results) == list(range(1, 61))
    assert await stores[0].read("k") == b"60"


class LateReads:
    def __init__(self, kv: Any) -> None:
        self._kv, self.lost = kv, 0

    async def get(self, key: str, validate_keys: bool = True) -> Any:
        if self.lost == 0:
            self.lost += 1
            raise NatsTimeout
        return await self._kv.get(key, validate_keys=validate_keys)


async def test_a_read_that_timed_out_is_asked_again(kv_bucket) -> None:
    await CasStore(kv_bucket).change("k", increment)
    store = CasStore(kv_bucket)
    store._kv = late = LateReads(kv_bucket)
    assert await store.change("k", increment) == 2
    assert late.lost == 1


async def test_a_timeout_with_the_connection_lost_fails_at_once(kv_bucket, nats_url) -> None:
    store = CasStore(kv_bucket)
    store._inbox = late = LateReplies(store._inbox, lose=1, deliver=False)
    gone = await nats.connect(nats_url)
    await gone.close()
    store._nc = gone  # a client whose connection is lost, as this one's would be
    with pytest.raises(asyncio.TimeoutError):
        await store.change("k", increment)
    assert late.sent == 1  # not sent again: the call is refused now, not after a second timeout


async def test_a_read_timeout_with_the_connection_lost_fails_at_once(kv_bucket, nats_url) -> None:
    store = CasStore(kv_bucket)
    store._kv = late = LateReads(kv_bucket)
    gone = await nats.connect(nats_url)
    await gone.close()
    store._nc = gone
    with pytest.raises(asyncio.TimeoutError):
        await store.change("k", increment)
    assert late.lost == 1


class Counting:
    """A store's inbox counting the writes it sends."""

    def __init__(self, inbox: Any) -> None:
        self._inbox, self.sent = inbox, 0

    async def request(self, subject: str, payload: bytes, **kw: Any) -> Any:
        self.sent += 1
        return await self._inbox.request(subject, payload, **kw)


async def test_a_following_store_builds_on_anothers_write_without_failing_first(kv_bucket) -> None:
    """Two writers of one key taking turns (two workers serving one agent): the one that follows
    the bucket writes once per change; what it remembers never decides a write on its own."""
    follower, other = CasStore(kv_bucket), CasStore(kv_bucket)
    await follower.follow()
    try:
        assert await follower.change("k", increment) == 1
        for n in (2, 4):
            assert await other.change("k", increment) == n
            for _ in range(200):  # until the other's write is seen (it is delivered, not asked)
                if follower._known["k"][0] == str(n).encode():
                    break
                await asyncio.sleep(0.01)
            follower._inbox = counting = Counting(follower._inbox)
            reads = 0
            real_read = follower._read

            async def read(key: str) -> Any:
                nonlocal reads
                reads += 1
                return await real_read(key)

            follower._read = read  # type: ignore[method-assign]
            assert await follower.change("k", increment) == n + 1
            assert (counting.sent, reads) == (1, 0)
            follower._inbox, follower._read = counting._inbox, real_read  # type: ignore[method-assign]
        # A write the follower has not seen yet still only lands on the revision it was based on.
        await follower.close()
        assert await other.change("k", increment) == 6
        assert await follower.change("k", increment) == 7
    finally:
        await follower.close()


def test_a_delivered_messages_place_is_read_from_its_reply_subject() -> None:
    """Both layouts of a JetStream reply subject give the stream sequence and the time stored
    that nats-py would (the followed keys' revisions, the journal writer's lag)."""
    from nats.aio.msg import Msg
    from nats.errors import NotJSMessageError

    from infra.jetstream import stored

    for reply in ("$JS.ACK.KV_b.c.1.42.7.1700000000123456789.0",
                  "$JS.ACK._.acchash.KV_b.c.1.42.7.1700000000123456789.0.r1"):
        msg = Msg(None, subject="$KV.b.k", reply=reply)  # type: ignore[arg-type]
        sequence, ns = stored(msg)
        assert sequence == msg.metadata.sequence.stream == 42
        assert ns == 1_700_000_000_123_456_789
        assert abs(ns / 1e9 - msg.metadata.timestamp.timestamp()) < 1e-6
    with pytest.raises(NotJSMessageError):
        stored(Msg(None, subject="$KV.b.k", reply="_INBOX.x.y"))  # type: ignore[arg-type]
