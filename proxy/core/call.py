"""One call on its way through the pipeline, and how it ended (before it becomes an Outcome)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from proxy.core.outcome import Outcome, retry_later
from proxy.records.events import EventRecord
from proxy.identity.identity import Identity
from wire.manifest import ToolManifest


@dataclass(slots=True)
class Call:
    """A call (a resume is the same call, decided again; `resumed` says so)."""

    identity: Identity
    manifest: ToolManifest
    args: dict[str, Any]
    agent_run_id: str | None
    confidential: bool
    call_id: str
    decision_id: str
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    t0: float = field(default_factory=time.perf_counter)
    approval: dict[str, Any] | None = None  # the approval state the policy sees on resume
    resumed: bool = False
    idempotency_key: str | None = None
    # Awaited just before the tool gets the call (an idempotency key proves it is still this
    # request's); raises an ApiError if the call must not run.
    fence: Callable[[], Awaitable[None]] | None = None
    # An internal call of a plugin: the plugin's own call, and that call's deadline (epoch s).
    parent_call_id: str | None = None
    deadline: float | None = None
    forwarded_at: datetime | None = None  # when it was handed to its tool
    events: list[EventRecord] = field(default_factory=list)  # emitted so far
    turn_id: str | None = None  # the agent turn that made this call, if any
    # Its agent.tool.requested event's time, until the event is built (Records.requested).
    requested_at: datetime | None = None
    # Worked out while its tool runs (they do not depend on the reply), else when needed.
    args_digest: tuple[str, int] | None = None  # (sha256, size) of the canonical args
    result_id: str | None = None

    @property
    def context(self) -> dict[str, Any]:
        return {
            "team_id": self.identity.team_id,
            "agent_run_id": self.agent_run_id,
            "confidential": self.confidential,
        }


@dataclass(slots=True)
class Ending:
    """How a call ended, before it is made an Outcome and accounted."""

    status: str
    code: str | None = None
    message: str = ""
    executed: bool = False
    result_id: str | None = None
    output: Any = None
    tokens: int = 0
    compute: float = 0.0
    cost: float = 0.0
    reasons: list[str] | None = None
    tool_code: str | None = None
    retry_after: float | None = None
    diagnostics: list[str] = field(default_factory=list)
    refs: dict[str, list[Any]] = field(default_factory=dict)
    disconnected: bool = False  # the client went away: nobody receives the answer

    @property
    def transient(self) -> bool:
        """Nothing ran and trying again later may work (an idempotency key is released)."""
        return not self.executed and retry_later(self.status, self.code)


def outcome_of(call: Call, e: Ending) -> Outcome:
    return Outcome(
        status=e.status, code=e.code, message=e.message, call_id=call.call_id,
        decision_id=call.decision_id, result_id=e.result_id, output=e.output,
        executed=e.executed, tokens_used=e.tokens, cost=e.cost, reasons=e.reasons,
        tool_code=e.tool_code, retry_after=e.retry_after,
        diagnostic="; ".join(e.diagnostics)[:2000] if e.diagnostics else None,
        refs=e.refs, disconnected=e.disconnected)
