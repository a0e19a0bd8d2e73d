"""The start/close protocol of background parts (infra/lifecycle.py): order, failures, and the
one way a background task is cancelled."""

from __future__ import annotations

import asyncio

import pytest

from infra.lifecycle import Parts, cancel_and_wait


class Recorded:
    def __init__(self, name: str, log: list[str], *, fail_start: bool = False,
                 fail_close: bool = False) -> None:
        self.name, self.log = name, log
        self.fail_start, self.fail_close = fail_start, fail_close

    async def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    async def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail_close:
            raise RuntimeError(f"{self.name} cannot close")


async def test_parts_start_in_order_and_close_in_reverse() -> None:
    log: list[str] = []

    async def close_c() -> None:  # released by a function, as a connection is
        log.append("close c")

    async with Parts() as parts:
        await parts.start("a", Recorded("a", log))
        parts.started("b", Recorded("b", log))  # started its own way
        parts.on_close("c", close_c)
        await parts.start("d", Recorded("d", log))
        assert parts.status() == {"a": "running", "b": "running", "c": "running", "d": "running"}
    assert log == ["start a", "start d", "close d", "close c", "close b", "close a"]
    assert set(parts.status().values()) == {"closed"}


async def test_a_part_that_cannot_start_closes_those_before_it() -> None:
    log: list[str] = []
    with pytest.raises(RuntimeError, match="b cannot start"):
        async with Parts() as parts:
            await parts.start("a", Recorded("a", log))
            await parts.start("b", Recorded("b", log, fail_start=True))
    assert log == ["start a", "close a"]
    assert parts.status() == {"a": "closed"}


async def test_every_part_closes_when_one_fails_to_and_the_failure_is_raised() -> None:
    log: list[str] = []
    parts = Parts()
    for name in "abc":
        await parts.start(name, Recorded(name, log, fail_close=name == "b"))
    with pytest.raises(RuntimeError, match="b cannot close"):
        await parts.close()
    assert log[3:] == ["close c", "close b", "close a"]
    assert parts.status() == {"a": "closed", "b": "failed", "c": "closed"}


async def test_cancel_and_wait_ends_the_task_and_swallows_its_cancellation() -> None:
    ended = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    task = asyncio.create_task(forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled() and ended.is_set()
    await cancel_and_wait(None)  # nothing started: nothing to do


async def test_cancel_and_wait_raises_what_the_task_failed_with() -> None:
    async def fails() -> None:
        raise ValueError("broken")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="broken"):
        await cancel_and_wait(task)


async def test_a_close_that_is_itself_cancelled_stays_cancelled() -> None:
    """Unlike `with suppress(CancelledError): await task`, the closer's own cancellation is
    not swallowed with the task's."""
    release = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()  # takes its time to clean up

    task = asyncio.create_task(slow_to_end())
    await asyncio.sleep(0)
    closer = asyncio.create_task(cancel_and_wait(task))
    await asyncio.sleep(0.05)
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    release.set()
    await asyncio.wait([task])
    assert task.cancelled()
