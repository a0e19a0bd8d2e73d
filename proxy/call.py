"""One call on its way through the pipeline, how it ended, and the response body it gets."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from proxy.envelope import completed_body
from proxy.events import EventRecord
from proxy.identity import Identity
from proxy.limits.limiter import TokenReservation
from services.sdk.manifest import ToolManifest


# A tool's own error codes HTTP has a word for, so a client can branch on the status alone:
# bad input the tool found (4xx, as for input the proxy refuses itself), a missing record
# (404, also for another team's), a stale version or a taken name (409). The body is the same
# as for any tool error (FAILED, error.code tool_error, the tool's code in error.tool_code);
# every other tool error answers 200.
TOOL_ERROR_HTTP = {
    "invalid_args": 400, "invalid": 400, "invalid_path": 400, "invalid_content": 400,
    "invalid_input": 400, "invalid_invocation": 400, "invocation_required": 400,  # agent.invoke: the callee's schema, a chain
    "not_found": 404,
    "version_conflict": 409, "conflict": 409,
    "file_too_large": 413, "document_too_large": 413,
}


def tool_error_status(tool_code: str) -> int:
    return TOOL_ERROR_HTTP.get(tool_code, 200)


@dataclass(slots=True)
class Outcome:
    """What a surface renders: an HTTP status, a JSON body, extra headers."""

    http_status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return str(self.body.get("status", ""))


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
    run_reserved: bool = False  # a call was counted against a registered run's budget
    tokens_held: TokenReservation | None = None  # its estimated tokens, held until it ends
    # An internal call of a plugin: the plugin's own call, and that call's deadline (epoch s).
    parent_call_id: str | None = None
    deadline: float | None = None
    forwarded_at: datetime | None = None  # when it was handed to its tool
    events: list[EventRecord] = field(default_factory=list)  # emitted so far
    turn_id: str | None = None  # the agent turn that made this call, if any
    # Its agent.tool.requested event's time, until the event is built (Pipeline._requested).
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
    """How a call ended, before it is rendered and accounted."""

    http_status: int
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

    @property
    def transient(self) -> bool:
        """Nothing ran and trying again later may work (the idempotency key is released)."""
        return not self.executed and self.http_status in (429, 503)


def render(call: Call, e: Ending) -> dict[str, Any]:
    if e.status == "COMPLETED":
        assert e.result_id is not None
        body = completed_body(output=e.output, tokens_used=e.tokens, cost_1t=e.cost,
                              call_id=call.call_id, result_id=e.result_id,
                              decision_id=call.decision_id)
    else:
        error: dict[str, Any] = {"code": e.code, "message": e.message}
        if e.reasons is not None:
            error["reasons"] = e.reasons
        if e.tool_code is not None and e.tool_code != e.code:
            error["tool_code"] = e.tool_code
        if e.retry_after is not None:
            error["retry_after_s"] = round(min(e.retry_after, 86_400.0), 3)
        body = {"ok": False, "status": e.status, "error": error,
                "call_id": call.call_id, "decision_id": call.decision_id}
        if e.executed:
            if e.result_id is not None:
                body["result_id"] = e.result_id
            body["tokens_used"] = e.tokens
            body["cost_1t"] = e.cost
    if e.diagnostics:
        body["diagnostic"] = "; ".join(e.diagnostics)[:2000]
    for key, values in e.refs.items():
        if values:
            body[key] = values
    return body


def authorization_required_body(*, call_id: str, decision_id: str, approval_id: str,
                                expires_at: str, reasons: list[str]) -> dict[str, Any]:
    return {
        "ok": False,
        "status": "AUTHORIZATION_REQUIRED",
        "error": {
            "code": "authorization_required",
            "message": "a governance approval is required; resume the call once it is approved",
            "reasons": reasons,
        },
        "approval_id": approval_id,
        "expires_at": expires_at,
        "call_id": call_id,
        "decision_id": decision_id,
    }
