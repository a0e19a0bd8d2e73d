"""The wire convention between the proxy and services: subjects, headers, request and reply."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from pydantic import BaseModel, ConfigDict, Field

# Subjects. Tool names are validated before they are ever put into a subject.
ANNOUNCE_SUBJECT = "toolproxy.catalog.announce"
DISCOVER_SUBJECT = "toolproxy.catalog.discover"
GOODBYE_SUBJECT = "toolproxy.catalog.goodbye"


def invoke_subject(tool: str) -> str:
    return f"tools.{tool}.invoke"


def cancel_subject(tool: str) -> str:
    """Every instance of the tool's service listens (no queue group): whoever runs it stops."""
    return f"tools.{tool}.cancel"


def prepare_subject(tool: str) -> str:
    """A tool whose manifest says `approval_preview`: what a held call will run, prepared."""
    return f"tools.{tool}.prepare"


def queue_group(tool: str) -> str:
    return f"svc.{tool}"


# Headers carried by every invocation; services bind them into their logs.
H_CALL_ID = "Toolproxy-Call-Id"
H_DECISION_ID = "Toolproxy-Decision-Id"
H_TEAM_ID = "Toolproxy-Team-Id"
H_AGENT_ID = "Toolproxy-Agent-Id"
H_RUN_ID = "Toolproxy-Run-Id"
H_TURN_ID = "Toolproxy-Turn-Id"  # the agent turn that made the call, if any
H_DEADLINE = "Toolproxy-Deadline"  # absolute, unix epoch milliseconds
H_CONFIDENTIAL = "Toolproxy-Confidential"
# How a call needing approval was authorized: "per_call" (its approval's binding, the hash of
# what was prepared, in H_APPROVAL_REF) or "standing" (the standing approval's id).
H_APPROVAL = "Toolproxy-Approval"
H_APPROVAL_REF = "Toolproxy-Approval-Ref"
# On plugin calls only: the proxy replica running the call, where its internal() calls go.
H_REPLICA = "Toolproxy-Replica"



async def respond(nc: NATS, msg: Msg, data: bytes) -> None:
    """Answer a request on its reply subject, without headers. (nats-py's `Msg.respond` sends
    the request's headers back with the reply: every call's ids and deadline would travel
    twice, and the requester would parse them again, for nothing.)"""
    if not msg.reply:
        raise ValueError("the message has no reply subject")
    await nc.publish(msg.reply, data)


# The error codes a plugin call ends with (the proxy reports them as they are).
PLUGIN_ERROR_CODES = frozenset({"plugin_timeout", "plugin_memory", "plugin_error", "plugin_forbidden"})


def internal_subject(replica: str) -> str:
    """Where a plugin's internal() calls are relayed: the replica running the plugin call."""
    return f"toolproxy.plugins.internal.{replica}"

# Reply error codes with a meaning for the proxy (any other code is the tool's own error).
TIMEOUT = "timeout"  # the tool did not finish before its deadline
BUSY = "busy"  # refused before running: the team's share of the service is in use
# Refused before running: an upstream tool whose definition is not the pinned one (nothing
# was forwarded to the upstream); the proxy answers 503 tool_changed.
TOOL_CHANGED = "tool_changed"
# An upstream tool's endings the proxy reports as they are (services/upstreams); unavailable
# means nothing reached the upstream (its breaker is open, or it cannot be reached): a 503.
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_ERROR_CODES = frozenset({UPSTREAM_UNAVAILABLE, "upstream_timeout", "upstream_error"})
# Where the upstream bridge takes a sync request (queue group: one replica answers).
UPSTREAM_SYNC_SUBJECT = "toolproxy.upstreams.sync"


class ToolRequest(BaseModel):
    """What a service receives: validated args and the trusted call context."""

    model_config = ConfigDict(extra="ignore")

    args: dict[str, Any]
    context: dict[str, Any] = Field(default_factory=dict)


class ReplyError(BaseModel):
    code: str = Field(max_length=64)
    message: str = Field(max_length=2_000)


class ToolReply(BaseModel):
    """What a service answers: an output and its metering, or its own error."""

    model_config = ConfigDict(extra="ignore")

    ok: bool
    output: Any = None
    error: ReplyError | None = None
    tokens_used: int = Field(default=0, ge=0)
    compute_units: float = Field(default=0.0, ge=0)
    # What the result points at (records it created or read, files, facts observed, sources):
    # kept with the call and shown by GET /v1/calls/{id}. Bounded; opaque to the proxy.
    object_refs: list[Any] = Field(default_factory=list, max_length=100)
    artifacts: list[Any] = Field(default_factory=list, max_length=100)
    observations: list[Any] = Field(default_factory=list, max_length=100)
    provenance_refs: list[Any] = Field(default_factory=list, max_length=100)


class Announcement(BaseModel):
    """A service instance's heartbeat: the manifests of the tools it serves right now."""

    model_config = ConfigDict(extra="ignore")

    service: str = Field(max_length=64)
    instance: str = Field(max_length=64)
    heartbeat_s: float = Field(gt=0, le=60)
    tools: list[dict[str, Any]] = Field(max_length=256)


class Goodbye(BaseModel):
    model_config = ConfigDict(extra="ignore")

    instance: str = Field(max_length=64)


class InternalRequest(BaseModel):
    """A plugin's internal() call, relayed by the plugin host to the replica running the
    plugin's own call (named in the Toolproxy-Call-Id header)."""

    model_config = ConfigDict(extra="forbid")

    plugin: str = Field(max_length=64)
    service: str | None = Field(default=None, max_length=64)
    tool: str = Field(max_length=64)
    args: dict[str, Any]


class InternalReply(BaseModel):
    """Its outcome: the inner call's output, or its error code. `forbidden` ends the plugin's
    call with plugin_forbidden whatever the plugin does next."""

    model_config = ConfigDict(extra="ignore")

    ok: bool
    output: Any = None
    code: str | None = Field(default=None, max_length=64)
    message: str = Field(default="", max_length=2_000)
    forbidden: bool = False
