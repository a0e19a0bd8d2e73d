"""The native API's request envelope (DESIGN.md, "The native API"); the response body is
proxy.core.outcome.response_body."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from wire.ids import ID_PATTERN
from proxy.core.input_rules import TOOL_NAME_SCHEMA, StrictModel


class CallContext(StrictModel):
    """Caller-supplied context. The team is checked against the token; other keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    agent_run_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    team_id: str | None = Field(default=None, max_length=64)
    confidential: bool = False


class InvokeRequest(StrictModel):
    # The name's shape is checked by the pipeline (every surface), so a bad name gets its own
    # clear message; the document states the same pattern.
    tool: str = Field(min_length=1, max_length=256, json_schema_extra=TOOL_NAME_SCHEMA)
    args: dict[str, Any] = Field(default_factory=dict)
    context: CallContext = Field(default_factory=CallContext)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)

