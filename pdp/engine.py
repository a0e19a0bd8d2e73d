"""The engine interface: load a policy set, evaluate the decision entrypoint for an input."""

from __future__ import annotations

from typing import Any, Protocol

from pdp.policy_set import PolicySet


class Engine(Protocol):
    name: str

    @property
    def revision(self) -> str: ...

    async def load(self, policies: PolicySet) -> str:
        """Compile and swap in `policies`; on error raise PolicyInvalid and keep the old ones."""
        ...

    async def evaluate(self, input_doc: dict[str, Any]) -> Any:
        """The raw decision document, or None when undefined. Raises EngineError."""
        ...

    async def close(self) -> None: ...
