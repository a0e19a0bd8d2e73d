"""The embedded engine: regopy (rego-cpp) evaluating a compiled bundle entrypoint in-process."""

from __future__ import annotations

import time
from typing import Any

import orjson
from regopy import Input, Interpreter, RegoError

from pdp.errors import EngineError, PdpTimeout, PolicyInvalid
from pdp.policy_set import ENTRYPOINT, PolicySet


def compile_bundle(policies: PolicySet, entrypoints: list[str] | None = None) -> Any:
    """Compile modules into a bundle; raises PolicyInvalid with the engine's own message."""
    builder = Interpreter()
    try:
        for name, source in policies.modules.items():
            builder.add_module(name, source)
        bundle = builder.build(None, entrypoints or [ENTRYPOINT])
    except RegoError as exc:
        raise PolicyInvalid(str(exc)) from exc
    if not bundle.ok():
        raise PolicyInvalid("the policy bundle did not build")
    return bundle


def _warm_up(bundle: Any) -> None:
    """Evaluate once per category and phase before serving: a bundle's first evaluations do
    one-time work that should not count against a caller's budget."""
    rego = Interpreter()
    for category in ("A", "B", "C", "D"):
        for phase in ("list", "call"):
            doc = {
                "version": 1, "subject": {"agent_id": "warm-up", "team_id": "warm-up", "roles": ["agent"]},
                "action": "tool.warm.up.invoke",
                "tool": {"tool_id": "warm.up", "version": "0", "category": category, "action": "read",
                         "risk": "low", "network": False, "requires_approval": category == "D",
                         "timeout_ms": 1000, "plugin": False},
                "args": {}, "context": {"team_id": "warm-up", "agent_run_id": None, "confidential": False},
                "grants": [], "overrides": [], "team_rules": [], "approval": None, "phase": phase,
            }
            try:
                rego.set_input(Input(doc))
                rego.query_bundle_entrypoint(bundle, ENTRYPOINT)
            except (RegoError, ValueError):
                return  # a policy that fails here fails for callers too, and is denied there


class EmbeddedEngine:
    """One interpreter on the event loop's thread; the bundle is rebuilt only on policy change."""

    name = "embedded"

    def __init__(self) -> None:
        self._bundle: Any = None
        self._revision = ""
        self._rego = Interpreter()
        # A built-in that fails (to_number("x")...) is an error, not "undefined": otherwise a
        # deny rule could silently not fire. Errors become denials (fail closed).
        self._rego.strict_built_in_errors = True

    @property
    def revision(self) -> str:
        return self._revision

    async def load(self, policies: PolicySet) -> str:
        bundle = compile_bundle(policies)
        _warm_up(bundle)
        self._bundle, self._revision = bundle, policies.revision
        return self._revision

    async def evaluate(self, input_doc: dict[str, Any]) -> Any:
        return self.evaluate_inline(input_doc)

    def evaluate_inline(self, input_doc: dict[str, Any], budget_s: float | None = None) -> Any:
        """Evaluate now, on this thread. The budget is CPU time spent in the engine's query
        itself: what a runaway policy burns, and not a garbage collection or a scheduler
        pause of the interpreter around it. Over budget: PdpTimeout (a denial)."""
        if self._bundle is None:
            raise EngineError("no policy loaded")
        try:
            # Built node by node: cheaper than having rego-cpp parse a JSON term.
            self._rego.set_input(Input(input_doc))
            started = time.thread_time()
            out = self._rego.query_bundle_entrypoint(self._bundle, ENTRYPOINT)
            spent = time.thread_time() - started
        except (RegoError, ValueError) as exc:  # regopy raises JSONDecodeError for some failures
            raise EngineError(f"evaluation failed: {exc}") from exc
        if budget_s is not None and spent > budget_s:
            raise PdpTimeout(f"the policy took {spent * 1000:.1f} ms of CPU")
        if not out.ok():
            raise EngineError(f"evaluation failed: {out}")
        text = str(out)
        if text == "undefined":
            return None
        try:
            result = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise EngineError("unreadable engine output") from exc
        expressions = result.get("expressions") if isinstance(result, dict) else None
        if not expressions:
            return None  # undefined
        return expressions[0]

    async def close(self) -> None:
        self._bundle = None
