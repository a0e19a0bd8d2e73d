"""Subscriptions whose messages are handled as nats-py reads them, without a task between.

nats-py hands each message of a callback subscription to a task of that subscription, through
an asyncio.Queue: one more scheduling round per message before the callback runs. A handler
that only settles a future or starts a task of its own needs none of that. `subscribe_direct`
subscribes without a callback and puts in the subscription's place of that queue one whose
`put_nowait` calls the handler at once, in the client's read loop (the handler must not block
and should not raise: what it raises is logged and the message dropped). Measured at one
connection with `bench/ab.py` (the proxy's reply inbox and the services' invoke subscriptions,
12 rounds): the c=1 p50 0.045 ms lower [0.02-0.12], throughput at 32 connections unchanged.

It relies on one attribute of nats-py's Subscription (`_pending_queue`, in every 2.x release,
which pyproject allows); a release without it is refused at the first subscribe, loudly,
rather than served by a slower path nothing tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

log = structlog.get_logger("toolproxy.nats")

Handler = Callable[[Msg], None]


class _HandOver(asyncio.Queue):  # type: ignore[type-arg]
    """A pending queue that is always empty: each message goes straight to the handler (so
    nats-py's counts and drain see nothing pending, and its slow-consumer bound on pending
    bytes, which it adds to before handing a message over, is given back at once)."""

    def __init__(self, sub: Subscription, handle: Handler) -> None:
        super().__init__()
        self._sub = sub
        self._handle = handle

    def put_nowait(self, item: Any) -> None:
        self._sub._pending_size -= len(item.data)
        try:
            self._handle(item)
        except Exception:
            log.exception("nats_direct_handler_failed", subject=getattr(item, "subject", None))


async def subscribe_direct(nc: NATS, subject: str, handle: Handler, *,
                           queue: str = "") -> Subscription:
    """A subscription to `subject` (in `queue`'s group) whose messages `handle` takes in the
    client's read loop."""
    sub = await nc.subscribe(subject, queue=queue)
    try:
        hand_over(sub, handle)
    except RuntimeError:
        await sub.unsubscribe()
        raise
    return sub


def hand_over(sub: Subscription, handle: Handler) -> None:
    """The same for a subscription made without a callback: a JetStream push subscription's
    own (`PushSubscription._sub`), whose ordered consumer nats-py keeps checking and
    resetting as it reads (its flow control sees nothing pending, as it should)."""
    if not isinstance(getattr(sub, "_pending_queue", None), asyncio.Queue):
        raise RuntimeError("this nats-py's Subscription keeps no _pending_queue: "
                           "infra.nats_direct needs updating for it")
    sub._pending_queue = _HandOver(sub, handle)
