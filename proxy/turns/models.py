"""A turn's request body, its durable record, and the verdicts an agent returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wire.ids import ID_PATTERN

STATUSES = ("RUNNING", "AUTHORIZATION_REQUIRED", "COMPLETED", "FAILED", "CANCELLED")
FINAL = ("COMPLETED", "FAILED", "CANCELLED")
MAX_INPUT_CHARS = 8000


class StartTurn(BaseModel):
    """POST /v1/turns."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    agent: Literal["demo", "model"]

    @field_validator("input")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("input must not contain NUL characters")
        return value


@dataclass(slots=True)
class Turn:
    """A turn as its driver holds it: `state` is the agent's own, resumable across replicas."""

    turn_id: str
    team_id: str
    agent_id: str
    run_id: str
    agent: str
    status: str
    input: str
    state: dict[str, Any] = field(default_factory=dict)
    held: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    calls_made: int = 0
    tokens_used: int = 0
    step_count: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(slots=True)
class Step:
    kind: str  # user | agent | plan | tool_request | tool_result | authorization_required | result | error
    time: datetime
    body: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


# --- what an agent's run ends with ---------------------------------------------------------


@dataclass(slots=True)
class Held:
    """Stopped on calls awaiting a governance decision: [{call_id, approval_id, expires_at}]."""

    calls: list[dict[str, Any]]


@dataclass(slots=True)
class Done:
    result: dict[str, Any]


@dataclass(slots=True)
class Failed:
    code: str
    message: str


Verdict = Held | Done | Failed
