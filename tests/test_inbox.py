"""The reply inbox: each request ends once, with its reply, its deadline or its interrupt."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from nats.errors import ConnectionClosedError, NoRespondersError, TimeoutError as NatsTimeout

from infra.bus import close, connect
from infra.nats_inbox import Inbox, Interrupted, Meanwhile


@pytest.fixture
async def pair(nats_url: str):  # type: ignore[no-untyped-def]
    """An inbox, and a responder on a subject of its own that answers what it is told to."""
    nc = await connect(nats_url, name="inbox-test")
    served = await connect(nats_url, name="inbox-test-service")
    subject = f"test.inbox.{uuid.uuid4().hex}"
    hold = asyncio.Event()
    hold.set()
    seen: list[bytes] = []

    async def respond(msg) -> None:  # type: ignore[no-untyped-def]
        seen.append(msg.data)
        await hold.wait()
        await served.publish(msg.reply, b"re:" + msg.data)

    tasks: set[asyncio.Task[None]] = set()

    async def on_msg(msg) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.ensure_future(respond(msg))  # one held reply holds up no other
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    await served.subscribe(subject, cb=on_msg)
    await served.flush()
    inbox = Inbox(nc)
    await inbox.start()
    for _ in range(100):  # the server may take a moment to route the new subscription
        try:
            await inbox.request(subject, b"ready?", timeout_s=1)
            break
        except NoRespondersError:
            await asyncio.sleep(0.02)
    seen.clear()
    try:
        yield inbox, subject, hold, seen
    finally:
        await inbox.close()
        await close(served)
        await close(nc)


async def test_each_request_gets_its_own_reply(pair) -> None:  # type: ignore[no-untyped-def]
    inbox, subject, _, _ = pair
    replies = await asyncio.gather(*(inbox.request(subject, str(i).encode(), timeout_s=5)
                                     for i in range(200)))
    assert [r.data for r in replies] == [f"re:{i}".encode() for i in range(200)]
    assert inbox.waiting == 0


async def test_no_responders_and_the_deadline(pair) -> None:  # type: ignore[no-untyped-def]
    inbox, subject, hold, _ = pair
    with pytest.raises(NoRespondersError):
        await inbox.request(f"test.inbox.nobody.{uuid.uuid4().hex}", b"x", timeout_s=5)
    hold.clear()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NatsTimeout):
        await inbox.request(subject, b"slow", timeout_s=0.2)
    assert 0.15 < loop.time() - t0 < 2
    assert inbox.waiting == 0


async def test_an_interrupt_ends_the_wait_and_a_late_reply_is_dropped(pair) -> None:  # type: ignore[no-untyped-def]
    inbox, subject, hold, seen = pair
    hold.clear()
    interrupt: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(inbox.request(subject, b"a", timeout_s=5, interrupt=interrupt))
    while not seen:  # the service has it
        await asyncio.sleep(0.01)
    interrupt.set_result("governance")
    with pytest.raises(Interrupted):
        await waiting
    assert inbox.waiting == 0
    hold.set()  # the reply comes after all: nobody takes it, nothing breaks
    await asyncio.sleep(0.1)
    assert (await inbox.request(subject, b"b", timeout_s=5)).data == b"re:b"


async def test_a_reply_that_came_first_wins_over_a_later_interrupt(pair) -> None:  # type: ignore[no-untyped-def]
    """Whichever settles the request first wins: an interrupt set in the same instant as the
    reply's arrival, after it, changes nothing (the call's result is not lost)."""
    inbox, subject, _, _ = pair
    loop = asyncio.get_running_loop()
    for _ in range(20):
        interrupt: asyncio.Future[str] = loop.create_future()
        waiting = asyncio.ensure_future(inbox.request(subject, b"c", timeout_s=5, interrupt=interrupt))
        while not inbox.waiting:  # sent
            await asyncio.sleep(0)
        while inbox.waiting:  # the reply has settled the request; the caller has not resumed yet
            await asyncio.sleep(0)
        interrupt.set_result("late")
        assert (await waiting).data == b"re:c"


async def test_a_cancelled_caller_leaves_nothing_waiting(pair) -> None:  # type: ignore[no-untyped-def]
    inbox, subject, hold, seen = pair
    hold.clear()
    interrupt: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(inbox.request(subject, b"d", timeout_s=5, interrupt=interrupt))
    while not seen:
        await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert inbox.waiting == 0
    interrupt.set_result("after")  # no callback of the finished request is left on it
    await asyncio.sleep(0)


async def test_an_interrupt_already_done_sends_nothing(pair) -> None:  # type: ignore[no-untyped-def]
    inbox, subject, _, seen = pair
    interrupt: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    interrupt.set_result("before")
    with pytest.raises(Interrupted):
        await inbox.request(subject, b"e", timeout_s=5, interrupt=interrupt)
    await asyncio.sleep(0.1)
    assert b"e" not in seen and inbox.waiting == 0


async def test_a_failed_publish_leaves_nothing_behind(nats_url: str) -> None:
    """The connection closed under the request: the publish's error, nothing waiting, and an
    interrupt that completes afterwards settles nothing."""
    nc = await connect(nats_url, name="inbox-closed")
    inbox = Inbox(nc)
    await inbox.start()
    await nc.close()
    interrupt: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    with pytest.raises(ConnectionClosedError):
        await inbox.request("test.inbox.closed", b"x", timeout_s=1, interrupt=interrupt)
    interrupt.set_result("late")
    await asyncio.sleep(0)
    assert inbox.waiting == 0


async def test_a_cancelled_interrupt_interrupts_nothing(pair) -> None:  # type: ignore[no-untyped-def]
    """A watch given up (its future cancelled) is no cancel request: the reply still comes."""
    inbox, subject, hold, seen = pair
    loop = asyncio.get_running_loop()
    given_up: asyncio.Future[str] = loop.create_future()
    given_up.cancel()
    assert (await inbox.request(subject, b"f", timeout_s=5, interrupt=given_up)).data == b"re:f"
    hold.clear()
    watching: asyncio.Future[str] = loop.create_future()
    waiting = asyncio.ensure_future(inbox.request(subject, b"g", timeout_s=5, interrupt=watching))
    while b"g" not in seen:
        await asyncio.sleep(0.01)
    watching.cancel()
    await asyncio.sleep(0.05)
    hold.set()
    assert (await waiting).data == b"re:g"


async def test_meanwhile_runs_once_while_the_reply_is_on_its_way(pair) -> None:  # type: ignore[no-untyped-def]
    """The work runs after the message is sent and before its reply is back (the responder is
    held), once: finishing it afterwards does nothing more; its error is raised by finish()."""
    inbox, subject, hold, seen = pair
    hold.clear()
    runs: list[tuple[bool, int]] = []
    waiting: asyncio.Future[object] | None = None

    def work() -> None:
        assert waiting is not None
        runs.append((waiting.done(), len(seen)))

    later = Meanwhile(work)
    waiting = asyncio.ensure_future(inbox.request(subject, b"m", timeout_s=5, meanwhile=later))
    while b"m" not in seen:
        await asyncio.sleep(0.01)
    assert runs == [(False, 0)]  # ran before the responder had even seen it: no waiting on it
    hold.set()
    assert (await waiting).data == b"re:m"  # type: ignore[attr-defined]
    later.finish()
    assert len(runs) == 1

    def broken() -> None:
        raise ValueError("a bug in the deferred work")

    failing = Meanwhile(broken)
    assert (await inbox.request(subject, b"n", timeout_s=5, meanwhile=failing)).data == b"re:n"
    with pytest.raises(ValueError, match="deferred work"):
        failing.finish()
    failing.finish()  # raised once: the caller has it


async def test_meanwhile_runs_also_when_the_request_times_out_or_is_never_sent(nats_url: str) -> None:
    nc = await connect(nats_url, name="inbox-meanwhile")
    inbox = Inbox(nc)
    await inbox.start()
    subject = f"test.inbox.silent.{uuid.uuid4().hex}"
    silent = await nc.subscribe(subject)  # a responder that never answers
    await nc.flush()
    runs: list[str] = []
    timed_out = Meanwhile(lambda: runs.append("sent"))
    with pytest.raises(NatsTimeout):
        await inbox.request(subject, b"x", timeout_s=0.2, meanwhile=timed_out)
    assert runs == ["sent"]  # scheduled after the publish, done long before the deadline
    timed_out.finish()
    assert runs == ["sent"]
    await silent.unsubscribe()
    await nc.close()
    never_sent = Meanwhile(lambda: runs.append("finished by the caller"))
    with pytest.raises(ConnectionClosedError):
        await inbox.request(subject, b"y", timeout_s=1, meanwhile=never_sent)
    await asyncio.sleep(0.01)
    assert runs == ["sent"]  # a failed publish scheduled nothing
    never_sent.finish()
    assert runs == ["sent", "finished by the caller"]
