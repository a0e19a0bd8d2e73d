"""Subscriptions handled in nats-py's read loop (infra.nats_direct): every message, in order,
nothing left pending, a failing handler dropping only its own message."""

from __future__ import annotations

import asyncio
import uuid

from infra.bus import close, connect
from infra.nats_direct import subscribe_direct


async def test_every_message_in_order_and_nothing_counted_as_pending(nats_url: str) -> None:
    nc = await connect(nats_url, name="direct-test")
    pub = await connect(nats_url, name="direct-test-pub")
    subject = f"test.direct.{uuid.uuid4().hex}"
    seen: list[bytes] = []
    tasks: list[asyncio.Task[object] | None] = []

    def handle(msg) -> None:  # type: ignore[no-untyped-def]
        seen.append(msg.data)
        tasks.append(asyncio.current_task())

    sub = await subscribe_direct(nc, subject, handle)
    await nc.flush()
    payload = b"x" * 1024
    for i in range(3_000):
        await pub.publish(subject, str(i).encode() + b":" + payload)
    await pub.flush()
    for _ in range(200):
        if len(seen) == 3_000:
            break
        await asyncio.sleep(0.02)
    assert [s.split(b":")[0] for s in seen] == [str(i).encode() for i in range(3_000)]
    # Handled where nats-py reads (its read loop's task, not the subscription's own task a
    # callback would run in), none queued or counted: pending bytes that were never given back
    # would reach the slow-consumer bound and drop messages after ~64 MB.
    assert {t.get_coro().__qualname__ for t in tasks if t is not None} == {"Client._read_loop"}
    assert None not in tasks
    assert sub.pending_msgs == 0 and sub._pending_size == 0
    await sub.unsubscribe()
    await pub.publish(subject, b"after")
    await pub.flush()
    await asyncio.sleep(0.1)
    assert seen[-1] != b"after"
    await close(pub)
    await close(nc)


async def test_a_failing_handler_loses_only_its_message(nats_url: str) -> None:
    nc = await connect(nats_url, name="direct-test-fail")
    subject = f"test.direct.fail.{uuid.uuid4().hex}"
    seen: list[bytes] = []

    def handle(msg) -> None:  # type: ignore[no-untyped-def]
        if msg.data == b"bad":
            raise RuntimeError("a handler's bug")
        seen.append(msg.data)

    sub = await subscribe_direct(nc, subject, handle, queue="q")
    await nc.flush()
    for data in (b"a", b"bad", b"b"):
        await nc.publish(subject, data)
    await nc.flush()
    for _ in range(100):
        if len(seen) == 2:
            break
        await asyncio.sleep(0.02)
    assert seen == [b"a", b"b"]
    assert nc.is_connected
    await sub.drain()  # nothing pending: the drain ends at once
    await close(nc)
