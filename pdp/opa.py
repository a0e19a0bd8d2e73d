"""The OPA engine: a real OPA server over its REST API, through one shared client session.

Policies are pushed on start and on every change (PUT /v1/policies/<id>); stale modules are
deleted. Decisions come from POST /v1/data/toolproxy/authz/decision with the same input the
embedded engine sees. Before anything is pushed, the set is compiled by the embedded engine:
a broken revision never reaches OPA, and the previous one keeps serving there too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from opa_client.opa_async import AsyncOpaClient

from pdp.embedded import compile_bundle
from pdp.errors import EngineError, PolicyInvalid
from pdp.policy_set import PACKAGE_PATH, PolicySet

_ID_PREFIX = "toolproxy/"


class OpaEngine:
    name = "opa"

    def __init__(self, url: str, *, timeout_s: float = 1.0) -> None:
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
        client = await self._session()
        try:
            for name, source in policies.modules.items():
                await client.update_policy_from_string(source, _ID_PREFIX + name, rego_compat=False)
            for existing in await client.get_policies_list():
                if existing.startswith(_ID_PREFIX) and existing[len(_ID_PREFIX):] not in policies.modules:
                    await client.delete_policy(existing)
        except Exception as exc:
            raise PolicyInvalid(f"OPA refused the policy: {exc}") from exc
        self._revision = policies.revision
        return self._revision

    async def evaluate(self, input_doc: dict[str, Any]) -> Any:
        client = await self._session()
        try:
            result = await client.query_rule(
                input_doc, PACKAGE_PATH, "decision", query_params={"strict-builtin-errors": True}
            )
        except Exception as exc:
            raise EngineError(f"OPA query failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(result, dict):
            raise EngineError("OPA answered something that is not a query result")
        return result.get("result")  # absent: undefined

    async def close(self) -> None:
        if self._started:
            await self._client.__aexit__(None, None, None)
