"""The native API's request envelope and response body (DESIGN.md, "The native API")."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from proxy.identity import ID_PATTERN


class CallContext(BaseModel):
    """Caller-supplied context. The team is checked against the token; other keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    agent_run_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    team_id: str | None = Field(default=None, max_length=64)
    confidential: bool = False


class InvokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The name's shape is checked separately so a bad name gets its own clear message.
    tool: str = Field(min_length=1, max_length=256)
    args: dict[str, Any] = Field(default_factory=dict)
    context: CallContext = Field(default_factory=CallContext)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)


def completed_body(
    *,
    output: Any,
    tokens_used: int,
    cost_1t: float,
    call_id: str,
    result_id: str,
    decision_id: str,
) -> dict[str, Any]:
    return {
        "ok": True,
        "status": "COMPLETED",
        "output": output,
        "tokens_used": tokens_used,
        "cost_1t": cost_1t,
        "call_id": call_id,
        "result_id": result_id,
        "decision_id": decision_id,
    }
