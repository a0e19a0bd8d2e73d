"""The wire between agent.invoke and a registered agent: `agents.<agent_id>.invoke` (a NATS
queue group per agent), a request carrying the caller's identity chain, a bounded reply."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A subset of the proxy's id alphabet that is one NATS subject token (no `.`, `*`, `>`).
AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
AGENT_ID_RE = re.compile(AGENT_ID_PATTERN[1:-1], re.ASCII)
INVOCATION_ID_PATTERN = r"^[0-9a-f]{32}$"

# Headers beside the proxy's own (call id, team, agent, run, deadline).
H_AGENT_CHAIN = "Toolproxy-Agent-Chain"  # the callers, outermost first, comma-separated
H_INVOCATION_ID = "Toolproxy-Invocation-Id"

MAX_REPLY_BYTES = 1 << 20


def is_agent_id(value: object) -> bool:
    return isinstance(value, str) and AGENT_ID_RE.fullmatch(value) is not None


def agent_subject(agent_id: str) -> str:
    return f"agents.{agent_id}.invoke"


def agent_queue(agent_id: str) -> str:
    return f"agents.{agent_id}"


class AgentRequest(BaseModel):
    """What a registered agent receives. `chain` is who is calling, outermost first (the last
    is the direct caller); `depth` is its length. To invoke another agent on behalf of this
    invocation, pass `invocation_id` to agent.invoke; to have its own tool calls charged to
    the caller's run, pass `run_id` as their context.agent_run_id."""

    model_config = ConfigDict(extra="ignore")

    input: dict[str, Any]
    invocation_id: str = Field(pattern=INVOCATION_ID_PATTERN)
    team_id: str = Field(max_length=64)
    caller: str = Field(max_length=64)
    chain: list[str] = Field(min_length=1, max_length=16)
    depth: int = Field(ge=1, le=16)
    run_id: str | None = Field(default=None, max_length=64)
    call_id: str = Field(max_length=64)
    confidential: bool = False
    deadline_ms: int = Field(ge=0)


class AgentUsage(BaseModel):
    """What the agent consumed outside the proxy (its own tool calls are metered there):
    charged to the caller's call and run."""

    model_config = ConfigDict(extra="forbid")

    tokens: int = Field(default=0, ge=0, le=1_000_000_000)
    cost_1t: float = Field(default=0.0, ge=0, le=1_000_000)


class AgentFailure(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: str = Field(max_length=64, pattern=r"^[a-z][a-z0-9_]*$")
    message: str = Field(max_length=1_000)


class AgentReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ok: bool
    output: dict[str, Any] | None = None
    error: AgentFailure | None = None
    usage: AgentUsage = Field(default_factory=AgentUsage)
