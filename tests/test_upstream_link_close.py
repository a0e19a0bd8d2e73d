"""Closing an upstream link ends its session loop, whatever the MCP client's task groups make
of the cancellation (anyio's may absorb it, or wrap it in an exception group): the loop must
not reconnect and run on past the bridge's close (seen as a test teardown hanging 120 s)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.upstreams.breaker import Breaker
from services.upstreams.link import Endpoint, Link
from tests.support.waiting import until


class _Session:
    """A stand-in for the MCP client's session context: what it does with a cancellation that
    reaches it is the test's choice. It is never asked anything (no listen, no ping)."""

    protocol_version = "2025-11-25"

    def __init__(self, on_cancel: str, opened: list[int]) -> None:
        self._on_cancel, self._opened = on_cancel, opened

    async def __aenter__(self) -> _Session:
        self._opened.append(1)
        return self

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        if kind is asyncio.CancelledError and self._on_cancel == "absorb":
            return True
        if kind is asyncio.CancelledError and self._on_cancel == "wrap":
            raise BaseExceptionGroup("task group", [exc])
        return False


@pytest.mark.timeout(30)  # a loop that outlives its close hangs the test's event loop too
@pytest.mark.parametrize("on_cancel", ["absorb", "wrap", "propagate"])
async def test_close_ends_the_session_loop_whatever_the_client_does_with_the_cancel(on_cancel: str) -> None:
    link = Link(Endpoint(name="u", url="http://127.0.0.1:9/mcp", ping_every_s=3600), Breaker(3, 30))
    opened: list[int] = []
    link._client_for = lambda: _Session(on_cancel, opened)  # type: ignore[method-assign]
    link.start()
    assert await until(lambda: link.healthy, 5.0), "the session never came up"
    loop = link._task
    assert loop is not None
    await asyncio.wait_for(link.close(), 3)
    assert loop.done() and opened == [1] and not link.healthy  # ended: it cannot open another
