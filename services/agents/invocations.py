"""Open invocations in a NATS KV bucket, shared by every agent service instance: who invoked
whom on behalf of whom. A registered agent extends its chain by naming its invocation; the
record, not the caller, says what the chain is (it cannot be shortened or borrowed)."""

from __future__ import annotations

import contextlib
import secrets

from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proxy.jetstream import Ensure, asset_missing

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


class Invocations:
    """In memory on the server (an invocation lasts seconds): a restarted server lost the
    bucket, and the next write re-creates it."""

    def __init__(self) -> None:
        self._nc: NATS | None = None
        self._kv: KeyValue | None = None
        self._ensure = Ensure(self._create)

    async def open(self, nc: NATS) -> None:
        self._nc = nc
        await self._ensure()

    async def _create(self) -> None:
        assert self._nc is not None
        js = self._nc.jetstream(timeout=2.0)
        try:
            self._kv = await js.key_value(BUCKET)
        except Exception:
            self._kv = await js.create_key_value(config=KeyValueConfig(
                bucket=BUCKET, history=1, ttl=TTL_S, storage=StorageType.MEMORY))

    async def put(self, invocation: Invocation) -> None:
        assert self._kv is not None
        key, value = _key(invocation.invocation_id), invocation.model_dump_json().encode()
        try:
            await self._kv.put(key, value)
        except Exception as exc:
            if not asset_missing(exc):
                raise
            await self._ensure()
            await self._kv.put(key, value)

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

    async def end(self, invocation_id: str) -> None:
        assert self._kv is not None
        with contextlib.suppress(Exception):  # the TTL sweeps what is left
            await self._kv.delete(_key(invocation_id))
