"""Compare-and-set on NATS JetStream KV, with combining and the last revision remembered.

Changes to one key from this process are combined: while one write is in flight, later
changes queue; the next round applies all of them, in order, to the current value and writes
once. A replica therefore never conflicts with itself, and a burst on one key costs one
round trip, not one per call. Across replicas the write is conditional on the revision the
computation was based on: if another replica changed the key, the write is refused, the key is
read again and the round recomputed. A round that would change nothing (a refusal) was worked
out on a value read from the server, or is read and worked out again: another replica may have
made room since. Correctness never depends on the remembered revision.

A reply that does not come in time (a busy server, or this process's event loop paused past the
timeout) is not yet a failure: a read is asked again, and a write is sent again, recomputed if
the key moved, under the round's one `Nats-Msg-Id`, so that JetStream acknowledges a copy that
had landed as a duplicate instead of applying it twice (servers before 2.11 check the id before
the expected revision, later ones after it: both cases end in the duplicate).

The same holds while a replicated bucket elects a leader (its leader's server died): no
responders, 503s and timeouts are waited out for infra.jetstream.RIDE_OUT_S, the round's one
message sent again and again under its one id, far inside the bucket's duplicate window (two
minutes), which the new leader rebuilds from the stored messages. Past that, or on any other
error, the round fails: the caller fails closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, Header
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from infra.ids import new_hex
from infra.jetstream import RIDE_OUT_S, asset_missing, backoff, in_election, store, stored
from infra.nats_direct import hand_over
from infra.nats_inbox import Inbox

Step = Callable[[bytes | None], tuple[bytes | None, Any]]
Ensure = Callable[[], Awaitable[None]]

_MAX_ATTEMPTS = 16
_CACHE_MAX = 50_000
_WRONG_LAST_SEQUENCE = (10071, 10164)  # JetStream's error codes for a refused compare-and-set
_KV_OPERATION = "KV-Operation"  # on a delete or purge marker


class Contended(Exception):
    """A key kept changing under us; the caller fails closed."""


class CasStore:
    """`on_missing` re-creates the bucket when the server lost it (a memory bucket does not
    survive a restart); the round that found it missing is then tried once more."""

    def __init__(self, kv: KeyValue, on_missing: Ensure | None = None, *,
                 ride_out_s: float = RIDE_OUT_S) -> None:
        self._kv = kv
        # A single server elects nothing: there, one resend (a lost answer) and no more.
        self._ride_out_s = ride_out_s
        # The bucket's JetStream context and subject prefix (`$KV.<bucket>.`): a write is
        # published directly, with headers KeyValue.update does not let us set.
        self._js, self._prefix = kv._js, kv._pre
        self._nc = self._js._nc  # a timeout with the connection lost is not asked again
        # Writes go through an inbox of the store's own, their acknowledgements read with
        # orjson (infra.jetstream.store), not nats-py's request and dataclass; within the
        # JetStream context's timeout, as nats-py's publish would.
        self._inbox = Inbox(self._nc)
        self._timeout_s = float(self._js._timeout)
        self._on_missing = on_missing
        self._known: OrderedDict[str, tuple[bytes | None, int]] = OrderedDict()
        self._queued: dict[str, list[tuple[Step, asyncio.Future[Any]]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._follower: Any = None  # the bucket's stream, followed (see `follow`)

    async def change(self, key: str, fn: Step) -> Any:
        """Apply `fn(current) -> (new value, or None to leave it; result)` atomically."""
        return await self.submit(key, fn)

    def submit(self, key: str, fn: Step) -> asyncio.Future[Any]:
        """`change` as a future: once queued, the step is applied whether or not anyone still
        waits for it (a caller cancelled meanwhile learns its result from this future)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(key, []).append((fn, fut))
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._drain(key))
        return fut

    async def read(self, key: str) -> bytes | None:
        """The current value, read from the server (not the local memory)."""
        return (await self._read(key))[0]

    async def _drain(self, key: str) -> None:
        try:
            while self._queued.get(key):
                batch = self._queued.pop(key)
                try:
                    results = await self._apply(key, [fn for fn, _ in batch])
                except Exception as exc:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (_, fut), result in zip(batch, results):
                    if not fut.done():
                        fut.set_result(result)
        finally:
            self._workers.pop(key, None)

    async def follow(self) -> None:
        """Keep what is remembered of the keys this process works with fresh from the bucket's
        own stream: another process's write (a replica, a worker beside this one) is seen as it
        lands, and this process's next compare-and-set builds on it instead of failing on a
        stale revision and reading again (two round trips more). A shortcut only: a write is
        always conditional on its revision, whatever is remembered."""
        if self._follower is None:
            # Taken in the client's read loop (infra.nats_direct): every process sees every
            # write to its buckets, its own included; a task hop each is not worth it.
            follower = await self._js.subscribe(
                self._prefix + ">", ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
            try:
                hand_over(follower._sub, self._seen)
            except RuntimeError:
                await follower.unsubscribe()
                raise
            self._follower = follower

    def _seen(self, msg: Msg) -> None:
        key = msg.subject[len(self._prefix):]
        known = self._known.get(key)
        if known is None:
            return  # a key this process has not used: read when it is
        revision = stored(msg)[0]
        if revision <= known[1]:
            return  # this process's own write, or older than what it knows
        deleted = msg.headers is not None and msg.headers.get(_KV_OPERATION) is not None
        self._known[key] = (None if deleted else msg.data, revision)

    async def close(self) -> None:
        if self._follower is not None:
            follower, self._follower = self._follower, None
            with contextlib.suppress(Exception):
                await follower.unsubscribe()
        await self._inbox.close()

    def forget(self) -> None:
        """Drop remembered revisions (the bucket was re-created: they mean nothing now)."""
        self._known.clear()

    async def _apply(self, key: str, steps: list[Step]) -> list[Any]:
        try:
            return await self._apply_once(key, steps)
        except Exception as exc:
            if self._on_missing is None or not asset_missing(exc):
                raise
        await self._on_missing()
        self.forget()
        return await self._apply_once(key, steps)

    async def _ride(self, exc: BaseException, attempt: int, deadline: float) -> None:
        """Before sending again while the bucket has no leader: raises `exc` past `deadline`
        or when it is no election. A bucket the server lost is made again meanwhile."""
        lost = not (self._nc.is_connected or self._nc.is_reconnecting)  # closed: refused now
        late = attempt > 1 and asyncio.get_running_loop().time() > deadline
        if lost or late or not in_election(exc):
            raise exc
        if asset_missing(exc) and self._on_missing is not None:
            with contextlib.suppress(Exception):  # in an election, it fails too: waited out
                await self._on_missing()
        await asyncio.sleep(backoff(attempt))

    async def _apply_once(self, key: str, steps: list[Step]) -> list[Any]:
        deadline = asyncio.get_running_loop().time() + self._ride_out_s
        known = self._known.get(key)
        value, revision = known if known is not None else await self._read(key, deadline)
        remembered = known is not None
        # One message id for every write of this round: whichever copy lands first is the only
        # one JetStream applies; a later copy is acknowledged as its duplicate.
        msg_id = new_hex()
        timed_out: list[Any] | None = None  # the results of the write whose answer was lost
        compute, rides = True, 0
        for _ in range(_MAX_ATTEMPTS + 64):  # a ride out of RIDE_OUT_S is ~25 resends
            if compute:
                current, changed, results = value, False, []
                for step in steps:
                    new, result = step(current)
                    if new is not None:
                        current, changed = new, True
                    results.append(result)
                if not changed:
                    if remembered and timed_out is None:
                        # Worked out on the value this process last saw, nothing is checked
                        # against the server's: another replica may have made room since (tokens
                        # given back, a count released). Read, and work it out again.
                        value, revision = await self._read(key, deadline)
                        remembered = False
                        continue
                    # (After a lost answer this refuses or leaves the value, whether or not the
                    # lost write landed: at worst a token or a count is spent for nothing.)
                    return results
            try:
                ack = await self._publish(key, current, revision, msg_id)
            except KeyWrongLastSequenceError:
                value, revision = await self._read(key, deadline)
                compute, remembered = True, False
                continue
            except Exception as exc:
                rides += 1
                await self._ride(exc, rides, deadline)
                if isinstance(exc, asyncio.TimeoutError) and timed_out is None:
                    timed_out = results  # it may have landed: only this message may go again
                compute = False  # the same message again
                continue
            if ack.get("duplicate"):  # the write whose answer was lost had landed: its results stand
                self._known.pop(key, None)
                return timed_out if timed_out is not None else results
            self._remember(key, current, int(ack["seq"]))
            return results
        raise Contended(key)

    async def _publish(self, key: str, value: bytes, last: int, msg_id: str) -> dict[str, Any]:
        """Write `value` if the key is still at revision `last`: JetStream's acknowledgement."""
        try:
            return await store(self._inbox, self._prefix + key, value, msg_id=msg_id,
                               timeout_s=self._timeout_s,
                               headers={Header.EXPECTED_LAST_SUBJECT_SEQUENCE: str(last)})
        except APIError as exc:
            if exc.err_code in _WRONG_LAST_SEQUENCE:
                raise KeyWrongLastSequenceError(description=exc.description) from exc
            raise

    async def _read(self, key: str, deadline: float | None = None) -> tuple[bytes | None, int]:
        try:
            entry = await self._get(key, deadline)
        except KeyNotFoundError as exc:
            # A deleted key has a tombstone revision to build on; a missing one has none.
            entry_rev = getattr(getattr(exc, "entry", None), "revision", None) or 0
            self._remember(key, None, entry_rev)
            return None, entry_rev
        self._remember(key, entry.value, entry.revision or 0)
        return entry.value, entry.revision or 0

    async def _get(self, key: str, deadline: float | None = None) -> Any:
        """A read changes nothing: asked again while the bucket elects a leader (until
        `deadline`; without one, once after a timeout)."""
        if deadline is None:
            deadline = asyncio.get_running_loop().time()
        attempt = 0
        while True:
            try:
                return await self._kv.get(key, validate_keys=False)
            except KeyNotFoundError:
                raise
            except Exception as exc:
                attempt += 1
                if attempt == 1 and isinstance(exc, asyncio.TimeoutError) and self._nc.is_connected:
                    continue
                await self._ride(exc, attempt, deadline)

    def _remember(self, key: str, value: bytes | None, revision: int) -> None:
        self._known[key] = (value, revision)
        self._known.move_to_end(key)
        if len(self._known) > _CACHE_MAX:
            self._known.popitem(last=False)
