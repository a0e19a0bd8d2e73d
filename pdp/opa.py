"""The OPA engine: a real OPA server over its REST API, through one shared client session.

Policies are pushed on start and on every change (PUT /v1/policies/<id>); stale modules are
deleted. Decisions come from POST /v1/data/toolproxy/authz/decision with the same input the
embedded engine sees. Before anything is pushed, the set is compiled by the embedded engine:
a broken revision never reaches OPA, and the previous one keeps serving there too.

A restarted OPA server (a sidecar, `restart: unless-stopped`) comes back empty: the engine
checks the server's policy list every `check_every_s` and after any undefined decision, and
pushes its revision again; until then it is not healthy (`/readyz` says so) and every decision
fails closed. The REST API takes one module at a time, so while this engine pushes, its own
decisions are refused (fail closed) rather than read from a half-loaded set. (Replicas that
share one OPA server see each other's pushes module by module: give each replica its own
sidecar server, as deploy/ does.)
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import urlsplit

import structlog
from opa_client.opa_async import AsyncOpaClient

from infra.lifecycle import cancel_and_wait
from pdp.embedded import compile_bundle
from pdp.errors import EngineError, PolicyInvalid
from pdp.policy_set import PACKAGE_PATH, PolicySet

log = structlog.get_logger("toolproxy.pdp.opa")

_ID_PREFIX = "toolproxy/"


class OpaEngine:
    name = "opa"

    def __init__(self, url: str, *, timeout_s: float = 1.0, check_every_s: float = 1.0) -> None:
        parts = urlsplit(url)
        self._client = AsyncOpaClient(
            host=parts.hostname or "localhost",
            port=parts.port or (443 if parts.scheme == "https" else 8181),
            ssl=parts.scheme == "https",
            timeout=timeout_s,
            retries=0,  # the PDP's own budget decides; a retry would only overrun it
        )
        self._started = False
        self._revision = ""
        self._policies: PolicySet | None = None
        self._check_every_s = check_every_s
        self._watch: asyncio.Task[None] | None = None
        self._resync = asyncio.Event()
        self._push_lock = asyncio.Lock()
        self._pushing = False
        self.healthy = False

    @property
    def revision(self) -> str:
        return self._revision

    async def _session(self) -> AsyncOpaClient:
        if not self._started:
            await self._client.__aenter__()  # opens its one session
            self._started = True
        return self._client

    async def load(self, policies: PolicySet) -> str:
        compile_bundle(policies)  # raises PolicyInvalid with the engine's message
        try:
            await self._push(policies)
        except Exception as exc:
            raise PolicyInvalid(f"OPA refused the policy: {exc}") from exc
        self._policies, self._revision, self.healthy = policies, policies.revision, True
        if self._watch is None:
            self._watch = asyncio.create_task(self._watch_server(), name="opa-watch")
        return self._revision

    async def _push(self, policies: PolicySet) -> None:
        async with self._push_lock:
            client = await self._session()
            self._pushing = True
            try:
                for name, source in policies.modules.items():
                    await client.update_policy_from_string(source, _ID_PREFIX + name, rego_compat=False)
                for existing in await client.get_policies_list():
                    if existing.startswith(_ID_PREFIX) and existing[len(_ID_PREFIX):] not in policies.modules:
                        await client.delete_policy(existing)
            finally:
                self._pushing = False

    async def _in_sync(self) -> bool:
        """The server holds every module of the serving revision (a restart loses them all)."""
        assert self._policies is not None
        client = await self._session()
        held = set(await client.get_policies_list())
        return all(_ID_PREFIX + name in held for name in self._policies.modules)

    async def _watch_server(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._resync.wait(), self._check_every_s)
            self._resync.clear()
            if self._policies is None:
                continue
            try:
                if not await self._in_sync():
                    self.healthy = False
                    log.warning("opa_policy_missing", revision=self._revision)
                    await self._push(self._policies)
                    log.info("opa_policy_repushed", revision=self._revision)
                self.healthy = True
            except Exception as exc:  # OPA away: decisions fail closed meanwhile
                if self.healthy:
                    log.warning("opa_unreachable", error=str(exc) or type(exc).__name__)
                self.healthy = False

    async def evaluate(self, input_doc: dict[str, Any]) -> Any:
        if self._pushing:  # some modules of the revision are in, others not yet
            raise EngineError("OPA is being loaded with the policy revision")
        client = await self._session()
        try:
            result = await client.query_rule(
                input_doc, PACKAGE_PATH, "decision", query_params={"strict-builtin-errors": True}
            )
        except Exception as exc:
            self.healthy = False
            self._resync.set()
            raise EngineError(f"OPA query failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(result, dict):
            raise EngineError("OPA answered something that is not a query result")
        if "result" not in result:  # undefined: the server may have lost the policy
            self._resync.set()
        return result.get("result")

    async def close(self) -> None:
        await cancel_and_wait(self._watch)
        if self._started:
            await self._client.__aexit__(None, None, None)
