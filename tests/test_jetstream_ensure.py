"""Ensuring JetStream assets: never twice at once, and at startup a few tries past timeouts
(a busy server's API may answer later than one request's timeout); storing a message."""

from __future__ import annotations

import asyncio
import uuid

import nats.errors
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NoStreamResponseError

from infra.bus import close, connect
from infra.nats_inbox import Inbox
from infra.jetstream import Ensure, asset_missing, store


async def test_concurrent_callers_share_one_run() -> None:
    runs = 0

    async def ensure() -> None:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.05)

    e = Ensure(ensure)
    await asyncio.gather(*(e() for _ in range(10)))
    assert runs == 1
    await e()
    assert runs == 2  # a later call runs again


async def test_at_start_tries_again_after_timeouts_only() -> None:
    answers = [nats.errors.TimeoutError(), nats.errors.TimeoutError(), None]

    async def slow_then_fine() -> None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer

    await Ensure(slow_then_fine).at_start()
    assert answers == []

    async def always_slow() -> None:
        raise nats.errors.TimeoutError()

    with pytest.raises(asyncio.TimeoutError):
        await Ensure(always_slow).at_start(attempts=3)

    calls = 0

    async def refused() -> None:  # not a timeout: no second try
        nonlocal calls
        calls += 1
        raise RuntimeError("bad config")

    with pytest.raises(RuntimeError):
        await Ensure(refused).at_start()
    assert calls == 1


async def test_store_answers_as_nats_pys_publish_does(nats_url: str) -> None:
    """What the journal publishes through: stored and acknowledged once (a second message with
    the same id is the stream's duplicate), no stream for the subject, a refused message."""
    nc = await connect(nats_url, name="store-test")
    js = nc.jetstream()
    name = f"TEST_STORE_{uuid.uuid4().hex[:8].upper()}"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"], max_msg_size=64))
    inbox = Inbox(nc)
    try:
        ack = await store(inbox, f"{name.lower()}.a", b"x", msg_id="m1", timeout_s=2)
        assert ack["stream"] == name and ack["seq"] == 1 and not ack.get("duplicate")
        again = await store(inbox, f"{name.lower()}.a", b"x", msg_id="m1", timeout_s=2)
        assert again["seq"] == 1 and again["duplicate"] is True
        with pytest.raises(NoStreamResponseError) as nothing:
            await store(inbox, f"nowhere.{uuid.uuid4().hex}", b"x", msg_id="m2", timeout_s=2)
        assert asset_missing(nothing.value)
        with pytest.raises(APIError) as refused:
            await store(inbox, f"{name.lower()}.b", b"y" * 100, msg_id="m3", timeout_s=2)
        assert not asset_missing(refused.value)
        assert (await js.stream_info(name)).state.messages == 1
    finally:
        await inbox.close()
        await js.delete_stream(name)
        await close(nc)
