"""Requests over NATS whose replies come to this process's inbox: one wildcard subscription
hands each reply to its request's future, which ends with the reply, the deadline or an
interrupt (a cancel asked for through the API), whichever comes first, exactly once.

Why not nats-py's `request`: a caller that must also stop when a cancel arrives would run it
in a task of its own and wait on both with `asyncio.wait` (one more task and two more
scheduling rounds per call), and `request` itself waits through `asyncio.wait_for`. Here the
request's future is the only thing awaited: its reply, its timer and its interrupt each try
to settle it, and the first one wins. Measured on a loopback server, requester and responder
in one process: 240-330 us CPU per request (a task, asyncio.wait and nats-py's request)
against 178-224 us."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

# How the server says that nobody is subscribed to a request's subject (the `Status` header
# of an empty reply, the client having asked for such replies: nats-py does).
_STATUS = "Status"
_NO_RESPONDERS = "503"


class Interrupted(Exception):
    """The request's interrupt came first: nobody waits for the reply any more."""


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
        self._sub = await self._nc.subscribe(prefix + "*", cb=self._on_reply)
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
                      interrupt: asyncio.Future[Any] | None = None) -> Msg:
        """The reply. Raises nats-py's NoRespondersError and TimeoutError (and whatever its
        publish raises: ConnectionClosedError...), or Interrupted once `interrupt` has a result
        (a cancelled `interrupt` only means that nobody watches for one any more)."""
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

    async def _on_reply(self, msg: Msg) -> None:
        reply = self._waiting.pop(msg.subject[len(self._prefix):], None)
        if reply is not None and not reply.done():
            reply.set_result(msg)


def _settle(reply: asyncio.Future[Msg], error: type[Exception]) -> None:
    if not reply.done():
        reply.set_exception(error())
