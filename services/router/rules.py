"""The routing rules (package toolproxy.router of the policy) compiled by regopy in the router
service: the active policy revision from Postgres, followed within a second; the shipped
rules when the active revision has none."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import orjson
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from regopy import Input, Interpreter, RegoError

from infra.lifecycle import cancel_and_wait
from pdp.embedded import compile_bundle
from pdp.errors import PolicyInvalid
from pdp.policy_set import PolicySet, load_policy_dir
from pdp.policy_store import active_policies

log = structlog.get_logger("toolproxy.router")

ENTRYPOINT = "toolproxy/router/decision"
CACHE_SIZE = 4096  # decisions per revision: the same request is routed the same way
_PACKAGE_RE = re.compile(r"^package\s+toolproxy\.router\s*$", re.M)


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["model", "agent"]
    id: str = Field(min_length=1, max_length=128)


class RouteDecision(BaseModel):
    """What the rules answer; anything else is refused (no route rather than a guess)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: Target | None
    reasons: list[str] = Field(max_length=200)


class RulesError(Exception):
    """The rules could not decide (none loaded, an evaluation error, a malformed answer)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    bundle: Any
    revision: str  # the policy revision; "shipped" marks the built-in rules


def has_router_rules(policies: PolicySet) -> bool:
    return any(_PACKAGE_RE.search(source) for source in policies.modules.values())


class RouterRules:
    """Polls the active revision (a one-row read) every `poll_s`: a push reaches the rules
    within that, without a LISTEN connection of its own; a revision that does not compile
    leaves the previous rules serving."""

    def __init__(self, pool: asyncpg.Pool, *, poll_s: float = 0.5) -> None:
        self._pool = pool
        self._poll_s = poll_s
        self._loaded: Loaded | None = None
        self._active: str | None = None  # the active revision last looked at
        self._rego = Interpreter()
        self._rego.strict_built_in_errors = True
        self._task: asyncio.Task[None] | None = None
        self._cache: OrderedDict[bytes, RouteDecision] = OrderedDict()

    @property
    def revision(self) -> str:
        return self._loaded.revision if self._loaded is not None else ""

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._follow(), name="router-rules")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def refresh(self) -> None:
        active = await self._pool.fetchval("SELECT revision FROM policy_active")
        if active == self._active and self._loaded is not None:
            return
        policies = await active_policies(self._pool) if active is not None else None
        self._active = active
        if policies is None or not has_router_rules(policies):
            if self._loaded is None or self._loaded.revision != "shipped":
                self._loaded = Loaded(self._compile(load_policy_dir()), "shipped")
                self._cache.clear()
                log.info("router_rules_loaded", revision="shipped", active=active)
            return
        try:
            bundle = self._compile(policies)
        except PolicyInvalid as exc:
            log.error("router_rules_rejected", revision=active, error=str(exc)[:500])
            return
        self._loaded = Loaded(bundle, policies.revision)
        self._cache.clear()
        log.info("router_rules_loaded", revision=policies.revision)

    @staticmethod
    def _compile(policies: PolicySet) -> Any:
        return compile_bundle(policies, entrypoints=[ENTRYPOINT])

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                await self.refresh()
            except Exception as exc:  # Postgres away: the loaded rules keep serving
                log.warning("router_rules_refresh_failed", error=str(exc) or type(exc).__name__)

    def decide(self, doc: dict[str, Any]) -> tuple[RouteDecision, str]:
        """(the decision, the revision that made it); an identical request is answered from
        the revision's cache."""
        loaded = self._loaded
        if loaded is None:
            raise RulesError("no routing rules are loaded")
        key = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached, loaded.revision
        decision = self._evaluate(loaded, doc)
        self._cache[key] = decision
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return decision, loaded.revision

    def _evaluate(self, loaded: Loaded, doc: dict[str, Any]) -> RouteDecision:
        try:
            self._rego.set_input(Input(doc))
            out = self._rego.query_bundle_entrypoint(loaded.bundle, ENTRYPOINT)
        except (RegoError, ValueError) as exc:
            raise RulesError(f"the routing rules failed: {exc}") from exc
        text = str(out)
        if not out.ok() or text == "undefined":
            raise RulesError("the routing rules gave no decision")
        try:
            expressions = orjson.loads(text).get("expressions") or []
            return RouteDecision.model_validate(expressions[0])
        except (orjson.JSONDecodeError, AttributeError, IndexError, ValidationError) as exc:
            raise RulesError("the routing rules' decision is malformed") from exc
