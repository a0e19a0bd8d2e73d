"""Ensuring JetStream assets: never twice at once, and at startup a few tries past timeouts
(a busy server's API may answer later than one request's timeout)."""

from __future__ import annotations

import asyncio

import nats.errors
import pytest

from proxy.jetstream import Ensure


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
