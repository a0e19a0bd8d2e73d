"""JetStream assets that can vanish under us (a restarted server loses memory-backed streams;
a new store loses everything): how to recognize the error, and ensuring them once at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from nats.errors import NoRespondersError
from nats.js.errors import APIError, KeyNotFoundError, NoStreamResponseError, ServiceUnavailableError

from proxy.inbox import Inbox, Meanwhile

_STREAM_NOT_FOUND = 10059
_CONSUMER_NOT_FOUND = 10014


def asset_missing(exc: BaseException) -> bool:
    """The stream or consumer a call needed is not there (as opposed to a timeout, a refused
    compare-and-set or a missing key)."""
    if isinstance(exc, KeyNotFoundError):
        return False
    if isinstance(exc, (NoStreamResponseError, NoRespondersError, ServiceUnavailableError)):
        return True
    return isinstance(exc, APIError) and exc.err_code in (_STREAM_NOT_FOUND, _CONSUMER_NOT_FOUND)


async def store(inbox: Inbox, subject: str, data: bytes, *, msg_id: str,
                timeout_s: float, meanwhile: Meanwhile | None = None) -> dict[str, Any]:
    """A message stored by the stream that takes its subject, as nats-py's JetStream publish
    does it, without its costs per call (its request machinery, the standard library's JSON,
    the acknowledgement's dataclass): the stream's acknowledgement, as it answered it. Raises
    what nats-py's would: NoStreamResponseError (no stream takes the subject), APIError (the
    stream refused it), nats-py's TimeoutError. `meanwhile` runs while the stream stores it
    (see proxy.inbox; the caller finishes it)."""
    try:
        msg = await inbox.request(subject, data, timeout_s=timeout_s,
                                  headers={"Nats-Msg-Id": msg_id}, meanwhile=meanwhile)
    except NoRespondersError:
        raise NoStreamResponseError from None
    ack: dict[str, Any] = orjson.loads(msg.data)
    if "error" in ack:
        raise APIError.from_error(ack["error"])
    return ack


class Ensure:
    """Runs an idempotent `ensure` coroutine, never twice at once: concurrent callers (every
    call that hit the missing bucket) wait for the one run in progress."""

    def __init__(self, ensure: Callable[[], Awaitable[None]]) -> None:
        self._ensure = ensure
        self._running: asyncio.Future[None] | None = None

    async def __call__(self) -> None:
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._ensure())
        await asyncio.shield(self._running)

    async def at_start(self, attempts: int = 5) -> None:
        """At startup: a busy server's JetStream API may take longer than one request's
        timeout; try a few times before giving up (each timeout is the client's, ~1 s)."""
        for attempt in range(1, attempts + 1):
            try:
                await self()
                return
            except asyncio.TimeoutError:  # nats.errors.TimeoutError is one
                if attempt == attempts:
                    raise
                await asyncio.sleep(0.1 * attempt)
