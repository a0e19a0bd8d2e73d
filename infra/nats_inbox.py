"""Requests over NATS whose replies come to this process's inbox: one wildcard subscription
hands each reply to its request's future, which ends with the reply, the deadline or an
interrupt (a cancel asked for through the API), whichever comes first, exactly once.

Why not nats-py's `request`: a caller that must also stop when a cancel arrives would run it
in a task of its own and wait on both with `asyncio.wait` (one more task and two more
scheduling rounds per call), and `request` itself waits through `asyncio.wait_for`. Here the
request's future is the only thing awaited: its reply, its timer and its interrupt each try
to settle it, and the first one wins. Measured on a loopback server, requester and responder
in one process: 240-330 us CPU per request (a task, asyncio.wait and nats-py's request)
against 178-224 us.

A request can carry work that does not shape it (`Meanwhile`): records and counters its caller
would otherwise build before sending. It runs once the message is handed to the connection,
while the reply is on its way, so that at one connection it costs no latency (measured: 100 us
of work before the publish added 0.14 ms to the p50 of a call; the same work run meanwhile,
nothing)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

from infra.nats_direct import subscribe_direct

# How the server says that nobody is subscribed to a request's subject (the `Status` header
# of an empty reply, the client having asked for such replies: nats-py does).
_STATUS = "Status"
_NO_RESPONDERS = "503"


class Interrupted(Exception):
    """The request's interrupt came first: nobody waits for the reply any more."""


class Meanwhile:
    """Work to do while a request's reply is on its way, exactly once: the inbox schedules it
    after the publish (nats-py's flusher was woken first, so the message is written before
    it runs); its caller calls `finish` once it needs the work done, whichever way the
    request ended (a failed publish never scheduled it). What it raised is raised by
    `finish`."""

    __slots__ = ("_work", "_ran", "_error")

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work
        self._ran = False
        self._error: BaseException | None = None

    def __call__(self) -> None:
        if self._ran:
            return
        self._ran = True
        try:
            self._work()
        except Exception as exc:  # raised by finish(), in its caller's task
            self._error = exc

    def finish(self) -> None:
        self()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class Inbox:
    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._prefix = ""
        self._tokens = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Msg]] = {}
        self._sub: Subscription | None = None
        self._starting: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Subscribe (the first request does it, if nothing did before); one attempt at a
        time, and a failed one is tried again by the next caller."""
        if self._sub is not None:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._subscribe())
        await asyncio.shield(self._starting)

    async def _subscribe(self) -> None:
        # A new random inbox per process (nuid): no other client's replies land here, and a
        # reconnect subscribes again by itself.
        prefix = self._nc.new_inbox() + "."
        self._sub = await subscribe_direct(self._nc, prefix + "*", self._on_reply)
        self._prefix = prefix

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # the connection is closed already
                pass
            self._sub = self._starting = None

    @property
    def is_connected(self) -> bool:
        return bool(self._nc.is_connected)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def request(self, subject: str, payload: bytes, *, timeout_s: float,
                      headers: dict[str, str] | None = None,
                      interrupt: asyncio.Future[Any] | None = None,
                      meanwhile: Meanwhile | None = None) -> Msg:
        """The reply. Raises nats-py's NoRespondersError and TimeoutError (and whatever its
        publish raises: ConnectionClosedError...), or Interrupted once `interrupt` has a result
        (a cancelled `interrupt` only means that nobody watches for one any more).
        `meanwhile` runs once the message is sent (the caller finishes it)."""
        if self._sub is None:
            await self.start()
        if interrupt is not None and interrupt.done() and not interrupt.cancelled():
            raise Interrupted  # nothing sent
        loop = asyncio.get_running_loop()
        token = str(next(self._tokens))
        reply: asyncio.Future[Msg] = loop.create_future()
        self._waiting[token] = reply
        timer = loop.call_later(timeout_s, _settle, reply, NatsTimeout)
        stop = None
        if interrupt is not None:
            def stop(done: asyncio.Future[Any]) -> None:
                if not done.cancelled():
                    _settle(reply, Interrupted)
            interrupt.add_done_callback(stop)
        try:
            await self._nc.publish(subject, payload, reply=self._prefix + token, headers=headers)
            if meanwhile is not None:
                loop.call_soon(meanwhile)
            msg = await reply
        finally:
            timer.cancel()
            self._waiting.pop(token, None)
            if stop is not None:
                interrupt.remove_done_callback(stop)  # type: ignore[union-attr]
            if not reply.done():  # the publish failed: nothing may settle it any more
                reply.cancel()
        if not msg.data and msg.headers and msg.headers.get(_STATUS) == _NO_RESPONDERS:
            raise NoRespondersError
        return msg

    def _on_reply(self, msg: Msg) -> None:
        # In nats-py's read loop (infra.nats_direct): a reply settles its future at once.
        reply = self._waiting.pop(msg.subject[len(self._prefix):], None)
        if reply is not None and not reply.done():
            reply.set_result(msg)


def _settle(reply: asyncio.Future[Msg], error: type[Exception]) -> None:
    if not reply.done():
        reply.set_exception(error())
