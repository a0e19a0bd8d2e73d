"""Open invocations in a NATS KV bucket, shared by every agent service instance: who invoked
whom on behalf of whom. A registered agent extends its chain by naming its invocation; the
record, not the caller, says what the chain is (it cannot be shortened or borrowed)."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time

import orjson

from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.jetstream import Ensure, asset_missing, ensure_bucket, replicas_setting, ride_out
from infra.kv import CasStore

BUCKET = "toolproxy_agent_invocations"
# An invocation lives at most a category C deadline; the TTL only sweeps what a crash left.
TTL_S = 120.0


class Invocation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    invocation_id: str
    team_id: str
    callee: str
    chain: list[str] = Field(max_length=16)
    run_id: str | None = None
    deadline: float  # epoch seconds


def new_invocation_id() -> str:
    return secrets.token_hex(16)


def _key(invocation_id: str) -> str:
    return f"inv.{invocation_id}"  # the id's shape is checked by the tool's input schema


def _serving_key(team_id: str, callee: str) -> str:
    """`serving.<team and callee hashed>`: the invocations an agent is inside right now, as
    {invocation id: deadline}."""
    return "serving." + hashlib.blake2b(f"{team_id}\0{callee}".encode(), digest_size=16).hexdigest()


def _serving_step(add: tuple[str, float] | None = None, remove: str | None = None):  # type: ignore[no-untyped-def]
    def step(raw: bytes | None) -> tuple[bytes | None, None]:
        now = time.time()
        open_ = {k: v for k, v in (orjson.loads(raw) if raw else {}).items() if v > now and k != remove}
        if add is not None:
            open_[add[0]] = add[1]
        return orjson.dumps(open_), None
    return step


class Invocations:
    """In memory on the server (an invocation lasts seconds): a restarted server lost the
    bucket, and the next write re-creates it."""

    def __init__(self) -> None:
        self._nc: NATS | None = None
        self._replicas = 1
        self._kv: KeyValue | None = None
        self._serving: CasStore | None = None
        self._ensure = Ensure(self._create)

    async def open(self, nc: NATS) -> None:
        self._nc = nc
        self._replicas = replicas_setting()  # TOOLPROXY_JETSTREAM_REPLICAS (invalid: refused here)
        await self._ensure.at_start()

    async def _create(self) -> None:
        assert self._nc is not None
        js = self._nc.jetstream(timeout=2.0)
        self._kv = await ensure_bucket(js, KeyValueConfig(
            bucket=BUCKET, history=1, ttl=TTL_S, storage=StorageType.MEMORY,
            replicas=self._replicas))
        if self._serving is None:
            self._serving = CasStore(self._kv, on_missing=self._ensure,
                                     ride_out_s=ride_out(self._replicas))
        else:
            self._serving.forget()

    async def put(self, invocation: Invocation) -> None:
        assert self._kv is not None
        key, value = _key(invocation.invocation_id), invocation.model_dump_json().encode()
        serving = _serving_key(invocation.team_id, invocation.callee)
        try:
            await self._kv.put(key, value)
        except Exception as exc:
            if not asset_missing(exc):
                raise
            await self._ensure()
            await self._kv.put(key, value)
        assert self._serving is not None
        await self._serving.change(serving, _serving_step(add=(invocation.invocation_id,
                                                               invocation.deadline)))

    async def serving(self, team_id: str, callee: str) -> bool:
        """Whether this agent is inside an open invocation now (its own calls of agent.invoke
        must then name it: an agent cannot start a fresh chain to escape depth and cycles)."""
        assert self._serving is not None
        raw = await self._serving.read(_serving_key(team_id, callee))
        now = time.time()
        return any(deadline > now for deadline in (orjson.loads(raw) if raw else {}).values())

    async def get(self, invocation_id: str) -> Invocation | None:
        assert self._kv is not None
        try:
            entry = await self._kv.get(_key(invocation_id))
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None
        try:
            return Invocation.model_validate_json(entry.value)
        except ValidationError:
            return None

    async def end(self, invocation: Invocation) -> None:
        assert self._kv is not None
        assert self._serving is not None
        with contextlib.suppress(Exception):  # deadlines and the TTL sweep what is left
            await self._serving.change(_serving_key(invocation.team_id, invocation.callee),
                                       _serving_step(remove=invocation.invocation_id))
            await self._kv.delete(_key(invocation.invocation_id))
