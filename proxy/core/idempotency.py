"""Idempotency keys, claimed per team in a JetStream KV bucket: one execution per key, replays
answered with the original response, a different intent refused.

Why JetStream and not Postgres: a claim granted must never be lost, or a retried key runs its
call twice. JetStream acknowledges a write once the bucket's replicas have it (a majority of
three on a cluster, TOOLPROXY_JETSTREAM_REPLICAS), so a leader election keeps every claim; a
Postgres that fails over to an asynchronous standby may lose a committed row. And calls are
served while Postgres is away or stalled: a claim waits for it no more than a call does.

A key goes claimed -> running -> done, each step a compare-and-set on the key's revision:
  claimed  create-if-absent, with a short lease (the decision and the admission take place);
  running  just before the tool is handed the call: the owner proves it still holds the claim
           (fencing). A request whose claim was taken over meanwhile stops there, having run
           nothing;
  done     the response (as it may be stored), kept for replays until the bucket's TTL.
A request finding the key claimed or running within its lease is told the call is in
progress. Past the lease, a claimed key (its tool never got the call) is taken over, a clean
retry; a running one ends as its call's record says (proxy.core.pipeline.idempotency).
Every operation is bounded by the JetStream timeout: a store that does not answer refuses the
call (503 idempotency_unavailable) before anything runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from infra.jetstream import RIDE_OUT_S, Ensure, asset_missing, backoff, in_election, raise_replicas
from wire.digest import canonical

BUCKET = "toolproxy_idempotency"
CLAIMED, RUNNING, DONE = "claimed", "running", "done"


def intent_hash(tool: str, args: dict[str, Any], context: dict[str, Any]) -> str:
    return hashlib.sha256(canonical({"tool": tool, "args": args, "context": context})).hexdigest()


def kv_key(team_id: str, key: str) -> str:
    """The bucket's key: a digest (a client's key may hold any character, and is nobody's
    subject to read)."""
    return hashlib.sha256(f"{team_id}\x00{key}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Claim:
    """`owned`: this request runs the call (`revision` is its hold on the key). Otherwise
    `response` holds the stored response, or the key is in use (`in_progress`, for
    `retry_after` seconds at most), bound to another intent (`conflict`), or `stale`: its
    holder's lease has passed in `state` (claimed or running)."""

    owned: bool
    call_id: str
    revision: int = 0
    in_progress: bool = False
    conflict: bool = False
    stale: bool = False
    state: str = ""
    retry_after: float = 0.0
    http_status: int | None = None
    response: dict[str, Any] | None = None


class Unavailable(Exception):
    """The bucket did not answer in time (or is gone and could not be made again)."""


class IdempotencyStore:
    def __init__(self, nc: NATS, *, ttl: timedelta, replicas: int = 1, timeout_s: float = 1.0) -> None:
        self._js = nc.jetstream(timeout=timeout_s)
        self.ttl = ttl
        self._replicas = replicas
        self._kv: KeyValue | None = None
        self.ensure = Ensure(self._ensure)

    async def start(self) -> None:
        await self.ensure.at_start()

    async def close(self) -> None:
        return None

    async def _ensure(self) -> None:
        """The bucket, made if missing. Its max age only collects garbage (each value says when
        it expires, so a shorter TTL holds at once); it is raised to the TTL, never lowered."""
        try:
            self._kv = await self._js.key_value(BUCKET)
        except NotFoundError:
            self._kv = await self._js.create_key_value(config=KeyValueConfig(
                bucket=BUCKET, history=1, ttl=self.ttl.total_seconds(), storage=StorageType.FILE,
                replicas=self._replicas))
            return
        info = await self._js.stream_info(f"KV_{BUCKET}")
        max_age = info.config.max_age
        if max_age is not None and 0 < max_age < self.ttl.total_seconds():
            max_age = self.ttl.total_seconds()
        await raise_replicas(self._js, f"KV_{BUCKET}", self._replicas, info=info, max_age=max_age)

    async def _op(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """One bucket operation; the bucket made again if the server lost it. Wrong revisions
        and missing keys are the caller's to read. A request nobody took (no responders, a
        503: the bucket lost, or electing a leader) is sent again for up to RIDE_OUT_S; a
        timeout (it may have landed) and anything else is Unavailable at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RIDE_OUT_S
        attempt = 0
        while True:
            attempt += 1
            try:
                if self._kv is None:
                    await self.ensure()
                assert self._kv is not None
                return await fn(self._kv, *args, **kwargs)
            except (KeyWrongLastSequenceError, KeyNotFoundError):
                raise
            except Exception as exc:
                if isinstance(exc, asyncio.TimeoutError) and self._kv is not None:
                    raise Unavailable(str(exc) or type(exc).__name__) from exc
                if not (asset_missing(exc) or in_election(exc)) or loop.time() > deadline:
                    raise Unavailable(str(exc) or type(exc).__name__) from exc
                if asset_missing(exc):
                    self._kv = None
                await asyncio.sleep(backoff(attempt))

    def _value(self, state: str, call_id: str, intent: str, lease_s: float) -> bytes:
        now = time.time()
        return orjson.dumps({"state": state, "call_id": call_id, "intent": intent,
                             "lease": now + lease_s, "expires": now + self.ttl.total_seconds()})

    # --- the steps -----------------------------------------------------------------------

    async def claim(self, team_id: str, key: str, intent: str, call_id: str, *,
                    lease_s: float) -> Claim:
        k = kv_key(team_id, key)
        value = self._value(CLAIMED, call_id, intent, lease_s)
        for _ in range(3):
            try:
                revision = await self._op(lambda kv: kv.create(k, value))
                return Claim(owned=True, call_id=call_id, revision=int(revision))
            except KeyWrongLastSequenceError:
                pass
            try:
                entry = await self._op(lambda kv: kv.get(k))
            except KeyNotFoundError:
                continue  # released (or expired) in between: claim it again
            held = orjson.loads(entry.value)
            revision = int(entry.revision or 0)
            if held["call_id"] == call_id:  # our own create, whose acknowledgement was lost
                return Claim(owned=True, call_id=call_id, revision=revision)
            if held["expires"] <= time.time():  # past its TTL: as if it were not there
                try:
                    revision = await self._op(lambda kv: kv.update(k, value, last=revision))
                except (KeyWrongLastSequenceError, KeyNotFoundError):
                    continue
                return Claim(owned=True, call_id=call_id, revision=int(revision))
            if held["intent"] != intent:
                return Claim(owned=False, call_id=held["call_id"], conflict=True)
            if held["state"] == DONE:
                return Claim(owned=False, call_id=held["call_id"], state=DONE,
                             http_status=held["http_status"], response=held["response"])
            left = float(held["lease"]) - time.time()
            if left > 0:
                return Claim(owned=False, call_id=held["call_id"], in_progress=True,
                             state=held["state"], retry_after=left, revision=revision)
            return Claim(owned=False, call_id=held["call_id"], stale=True, state=held["state"],
                         revision=revision)
        raise Unavailable("the key kept changing")

    async def take_over(self, team_id: str, key: str, intent: str, call_id: str, stale: Claim, *,
                        lease_s: float) -> Claim | None:
        """A claimed key whose holder's lease passed (its tool never got the call): ours, unless
        another request took it first (None)."""
        k = kv_key(team_id, key)
        try:
            revision = await self._op(lambda kv: kv.update(k, self._value(CLAIMED, call_id, intent, lease_s),
                                                           last=stale.revision))
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            return None
        return Claim(owned=True, call_id=call_id, revision=int(revision))

    async def running(self, team_id: str, key: str, call_id: str, intent: str, revision: int, *,
                      lease_s: float) -> int:
        """The fence before the tool gets the call: still ours (the new revision), or raises
        KeyWrongLastSequenceError (taken over) or Unavailable."""
        k = kv_key(team_id, key)
        try:
            return int(await self._op(lambda kv: kv.update(k, self._value(RUNNING, call_id, intent, lease_s),
                                                           last=revision)))
        except KeyNotFoundError:
            raise KeyWrongLastSequenceError from None

    async def complete(self, team_id: str, key: str, call_id: str, intent: str, revision: int,
                       http_status: int, response: dict[str, Any]) -> bool:
        """Done with this response, if the key is still ours at `revision`."""
        k = kv_key(team_id, key)
        value = orjson.dumps({"state": DONE, "call_id": call_id, "intent": intent, "lease": 0,
                              "expires": time.time() + self.ttl.total_seconds(),
                              "http_status": http_status, "response": response})
        try:
            await self._op(lambda kv: kv.update(k, value, last=revision))
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            return False
        return True

    async def release(self, team_id: str, key: str, call_id: str, revision: int) -> None:
        """Nothing was executed (rate limited, unavailable): the key may be used again."""
        k = kv_key(team_id, key)
        try:
            await self._op(lambda kv: kv.delete(k, last=revision))
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            pass  # taken over meanwhile: not ours to release

    async def complete_call(self, team_id: str, key: str, call_id: str, http_status: int,
                            response: dict[str, Any]) -> bool:
        """For recovery: the key, if this call still holds it unfinished, is done so."""
        k = kv_key(team_id, key)
        try:
            entry = await self._op(lambda kv: kv.get(k))
        except KeyNotFoundError:
            return False
        held = orjson.loads(entry.value)
        if held["call_id"] != call_id or held["state"] == DONE:
            return False
        return await self.complete(team_id, key, call_id, held["intent"], int(entry.revision or 0),
                                   http_status, response)


