"""The start/close protocol of a process's background parts, and the small manager that starts
them in order and closes them in reverse (as OPA's plugin manager does with Start and Stop)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Literal, Protocol, TypeVar

import structlog

log = structlog.get_logger("toolproxy.lifecycle")

Status = Literal["running", "closed", "failed"]


class Closable(Protocol):
    async def close(self) -> None: ...


class Part(Closable, Protocol):
    """A background part: `start` brings it up (raising if it cannot), `close` lets it go and
    ends every task it started."""

    async def start(self) -> None: ...


P = TypeVar("P", bound=Part)
C = TypeVar("C", bound=Closable)


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel a background task and wait until it has ended. Its own cancellation is expected
    and swallowed; the caller's is not (`asyncio.wait` lets it through), and a task that had
    already failed raises its error, as awaiting it would."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.result()


class Parts:
    """Parts started in order, closed in reverse: as an `async with` block, a part that fails
    to start closes the ones before it, and leaving the block closes them all. Every part is
    closed even when one fails to; the first failure is raised after the last close."""

    def __init__(self) -> None:
        self._closers: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        self._status: dict[str, Status] = {}

    async def start(self, name: str, part: P) -> P:
        await part.start()
        return self.started(name, part)

    def started(self, name: str, part: C) -> C:
        """A part already running (started its own way, or a connection): closed with the rest."""
        self.on_close(name, part.close)
        return part

    def on_close(self, name: str, close: Callable[[], Awaitable[object]]) -> None:
        """Run `close` in this part's turn (for what a function releases, not a method)."""
        self._closers.append((name, close))
        self._status[name] = "running"

    def status(self) -> dict[str, Status]:
        return dict(self._status)

    async def close(self) -> None:
        failure: BaseException | None = None
        while self._closers:
            name, close = self._closers.pop()
            try:
                await close()
            except Exception as exc:
                log.exception("part_close_failed", part=name)
                self._status[name] = "failed"
                failure = failure or exc
            else:
                self._status[name] = "closed"
        if failure is not None:
            raise failure

    async def __aenter__(self) -> Parts:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
