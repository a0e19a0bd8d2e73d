"""JetStream assets that can vanish under us (a restarted server loses memory-backed streams;
a new store loses everything): how to recognize the error, ensuring them once at a time, and
their replicas (TOOLPROXY_JETSTREAM_REPLICAS: raised at start, never lowered); and where a
delivered message sits in its stream."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import (APIError, KeyNotFoundError, NoStreamResponseError, NotFoundError,
                            ServiceUnavailableError)
from nats.js.kv import KeyValue

from infra.nats_inbox import Inbox, Meanwhile

_STREAM_NOT_FOUND = 10059
_CONSUMER_NOT_FOUND = 10014
MAX_REPLICAS = 5  # JetStream's own ceiling
# How long a compare-and-set keeps sending its one message while the asset has no leader (a
# replicated asset's leader died: nats-server elects another within its RAFT election timeout,
# 4-9 s after the last heartbeat). Far inside the duplicate window (120 s) that makes a copy
# stored twice count once; past it the caller fails closed.
RIDE_OUT_S = 10.0
_UNAVAILABLE = 10008  # "JetStream system temporarily unavailable"


def in_election(exc: BaseException) -> bool:
    """No leader answers for the asset right now (it may be electing one), as opposed to a
    refusal: a request nobody took (no responders), a 503, or a timeout (which may have
    landed: only the same message, under the same Nats-Msg-Id, may be sent again)."""
    if isinstance(exc, KeyNotFoundError):
        return False
    if isinstance(exc, (NoStreamResponseError, NoRespondersError, ServiceUnavailableError,
                        asyncio.TimeoutError)):
        return True
    return isinstance(exc, APIError) and exc.err_code == _UNAVAILABLE


def ride_out(replicas: int) -> float:
    """How long to ride an election out on assets of `replicas`: a single server elects none."""
    return RIDE_OUT_S if replicas > 1 else 0.0


def backoff(attempt: int) -> float:
    """Seconds before the `attempt`-th resend while an election runs: 0.05 doubling to 0.5."""
    return min(0.5, 0.05 * 2 ** min(attempt, 4))


def replicas_setting(value: str | None = None) -> int:
    """TOOLPROXY_JETSTREAM_REPLICAS (for the processes without the proxy's Settings): how many
    servers keep each stream and bucket; 1 by default, 3 on a cluster."""
    raw = os.environ.get("TOOLPROXY_JETSTREAM_REPLICAS", "") if value is None else value
    if not raw.strip():
        return 1
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_REPLICAS:
        raise ValueError(f"TOOLPROXY_JETSTREAM_REPLICAS must be 1-{MAX_REPLICAS}, not {raw!r}")
    return int(raw)


async def raise_replicas(js: JetStreamContext, stream: str, replicas: int, *,
                         info: Any = None, **changes: Any) -> None:
    """The stream brought up to `replicas` (and `changes` applied) from its own configuration:
    never down (an operator's R5 stays R5), nothing else of it touched."""
    info = info or await js.stream_info(stream)
    if (info.config.num_replicas or 1) < replicas:
        changes["num_replicas"] = replicas
    if any(getattr(info.config, k) != v for k, v in changes.items()):
        await js.update_stream(dataclasses.replace(info.config, **changes))


async def ensure_bucket(js: JetStreamContext, config: KeyValueConfig) -> KeyValue:
    """The KV bucket, made as `config` says if missing, else brought up to its replicas."""
    try:
        kv = await js.key_value(config.bucket)
    except NotFoundError:
        return await js.create_key_value(config=config)
    await raise_replicas(js, f"KV_{config.bucket}", config.replicas)
    return kv


def asset_missing(exc: BaseException) -> bool:
    """The stream or consumer a call needed is not there (as opposed to a timeout, a refused
    compare-and-set or a missing key)."""
    if isinstance(exc, KeyNotFoundError):
        return False
    if isinstance(exc, (NoStreamResponseError, NoRespondersError, ServiceUnavailableError)):
        return True
    return isinstance(exc, APIError) and exc.err_code in (_STREAM_NOT_FOUND, _CONSUMER_NOT_FOUND)


async def store(inbox: Inbox, subject: str, data: bytes, *, msg_id: str,
                timeout_s: float, meanwhile: Meanwhile | None = None,
                headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A message stored by the stream that takes its subject, as nats-py's JetStream publish
    does it, without its costs per call (its request machinery, the standard library's JSON,
    the acknowledgement's dataclass): the stream's acknowledgement, as it answered it. Raises
    what nats-py's would: NoStreamResponseError (no stream takes the subject), APIError (the
    stream refused it), nats-py's TimeoutError. `meanwhile` runs while the stream stores it
    (see infra.nats_inbox; the caller finishes it). `headers`: more of JetStream's own (an
    expected last sequence)."""
    sent = {"Nats-Msg-Id": msg_id} if headers is None else {**headers, "Nats-Msg-Id": msg_id}
    try:
        msg = await inbox.request(subject, data, timeout_s=timeout_s, headers=sent,
                                  meanwhile=meanwhile)
    except NoRespondersError:
        raise NoStreamResponseError from None
    ack: dict[str, Any] = orjson.loads(msg.data)
    if "error" in ack:
        raise APIError.from_error(ack["error"])
    return ack


class Ensure:
    """Runs an idempotent `ensure` coroutine, never twice at once: concurrent callers (every
    call that hit the missing bucket) wait for the one run in progress. A run that failed is
    not tried again for `cooldown_s`: while a cluster elects a leader, every call would
    otherwise wait out its own JetStream API timeout; they fail at once with that error."""

    def __init__(self, ensure: Callable[[], Awaitable[None]], *, cooldown_s: float = 0.5) -> None:
        self._ensure = ensure
        self._running: asyncio.Future[None] | None = None
        self._cooldown_s = cooldown_s
        self._failed_at = float("-inf")

    async def __call__(self) -> None:
        loop = asyncio.get_running_loop()
        if self._running is None or self._running.done():
            last = self._running
            if (last is not None and not last.cancelled() and last.exception() is not None
                    and loop.time() - self._failed_at < self._cooldown_s):
                raise last.exception()  # type: ignore[misc]
            self._running = asyncio.ensure_future(self._ensure())
            self._running.add_done_callback(self._note)
        await asyncio.shield(self._running)

    def _note(self, fut: asyncio.Future[None]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self._failed_at = asyncio.get_running_loop().time()

    async def at_start(self, attempts: int = 5) -> None:
        """At startup: a busy server's JetStream API may take longer than one request's
        timeout; try a few times before giving up (each timeout is the client's, ~1 s)."""
        for attempt in range(1, attempts + 1):
            self._failed_at = float("-inf")  # no cooldown between these tries
            try:
                await self()
                return
            except asyncio.TimeoutError:  # nats.errors.TimeoutError is one
                if attempt == attempts:
                    raise
                await asyncio.sleep(0.1 * attempt)


_V1_TOKENS = 9  # a JetStream reply subject without domain and account hash


def stored(msg: Msg) -> tuple[int, int]:
    """A delivered JetStream message's sequence in its stream and the time it was stored (ns
    since the epoch), read from its reply subject alone (nats-py's `metadata` also builds a
    datetime and two dataclasses, on every message):
    `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>`, or
    with a domain and an account hash after `ACK` (two more tokens before the same fields)."""
    tokens = (msg.reply or "").split(".")
    if tokens[:2] == ["$JS", "ACK"]:
        if len(tokens) == _V1_TOKENS:
            return int(tokens[5]), int(tokens[7])
        if len(tokens) >= _V1_TOKENS + 2:
            return int(tokens[7]), int(tokens[9])
    metadata = msg.metadata  # not a JetStream reply: nats-py raises
    return int(metadata.sequence.stream), int(metadata.timestamp.timestamp() * 1e9)
