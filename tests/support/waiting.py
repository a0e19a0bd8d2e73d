"""Waiting on an event the test cannot subscribe to: poll a condition until it holds."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


async def until(check: Callable[[], bool | Awaitable[bool]], seconds: float = 10.0,
                every: float = 0.05) -> bool:
    """Poll `check` (a function or a coroutine function) until it holds (True) or `seconds`
    have passed (False: the caller asserts what it needed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        done = check()
        if inspect.isawaitable(done):
            done = await done
        if done:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(every)
