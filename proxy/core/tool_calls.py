"""OpenAI-shaped tool calls through the pipeline: the callable catalog as OpenAI `tools`, and
an assistant message's `tool_calls` run as one batch, one Outcome each — the one path of the
OpenAI surface and of the model agent.

Calls of one message run concurrently where they are independent: consecutive calls of read
tools run together; a write tool (or a resume) runs alone, in the order the model gave, so a
read listed after a write sees the write's effect.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import orjson
import structlog
from pydantic import ConfigDict, Field, field_validator, model_validator

from proxy.core.approval_flow import ApprovalFlow
from proxy.core.envelope import CallContext, InvokeRequest
from proxy.core.errors import InvalidArgs
from proxy.core.input_rules import StrictModel, json_text_problem
from proxy.core.notices import (
    RESUME_DESCRIPTION,
    RESUME_SCHEMA,
    RESUME_TOOL,
    describe,
    resume_arguments,
    resume_misuse,
)
from proxy.core.outcome import Outcome, response_body
from proxy.core.pipeline import Pipeline
from proxy.core.tool_names import from_openai, to_openai
from proxy.errors import ApiError
from proxy.identity.identity import Identity
from wire.portable_schema import published

log = structlog.get_logger("toolproxy.openai")

MAX_TOOL_CALLS = 32
MAX_ARGUMENTS_BYTES = 256 << 10  # one call's arguments (a JSON string)
MAX_PARALLEL = 8


class FunctionCall(StrictModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=256)
    arguments: str = Field(default="", max_length=MAX_ARGUMENTS_BYTES,
                           description="the arguments as a JSON object, in a string")

    @field_validator("arguments")
    @classmethod
    def _storable(cls, value: str) -> str:
        # JSON inside JSON: a NUL escape in the arguments is `\\u0000` in the body (an even
        # run of backslashes), so the body's own check does not see it; this one does.
        # Refused for the whole message, before any of its calls runs.
        problem = json_text_problem(value)  # not JSON: that call answers invalid_args itself
        if problem is not None:
            raise ValueError(problem)
        return value


class ToolCall(StrictModel):
    """An OpenAI `ChatCompletionMessageToolCall` (function calls only: we offer only functions)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class ToolCallsBody(StrictModel):
    tool_calls: list[ToolCall] = Field(min_length=1, max_length=MAX_TOOL_CALLS)
    context: CallContext = Field(default_factory=CallContext)
    # Each call's key is "<idempotency_key>:<tool_call id>", so a retried batch repeats none.
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _unique_ids(self) -> ToolCallsBody:
        if len({c.id for c in self.tool_calls}) != len(self.tool_calls):
            raise ValueError("tool_call ids must be unique")
        return self


def catalog_name(openai_name: str) -> str | None:
    """The catalog name an OpenAI function name spells, when it spells one."""
    try:
        return from_openai(openai_name)
    except ApiError:
        return None


def function_tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": parameters}}


async def openai_tools(pipeline: Pipeline, identity: Identity) -> dict[str, Any]:
    """The caller's callable catalog as OpenAI `tools`, and `names`: OpenAI name -> catalog
    name (also what the turn runtime hands its model)."""
    manifests = await pipeline.callable_tools(identity)
    tools = [function_tool(to_openai(m.tool_id), m.description, published(m.input_schema))
             for m in manifests]
    names = {to_openai(m.tool_id): m.tool_id for m in manifests}
    if any(m.requires_approval for m in manifests):
        tools.append(function_tool(RESUME_TOOL, RESUME_DESCRIPTION, RESUME_SCHEMA))
    return {"tools": tools, "names": names}


async def run_tool_calls(pipeline: Pipeline, flow: ApprovalFlow, identity: Identity,
                         body: ToolCallsBody, *, turn_id: str | None = None) -> list[Outcome]:
    """One outcome per tool call, in order (the OpenAI route's and the model agent's one path)."""
    return await _Runner(pipeline, flow, identity, body, turn_id=turn_id).run_all()


def content(outcome: Outcome, tool: str | None = None) -> str:
    """What the model reads: the tool's output as JSON, or the error with a plain explanation
    (`tool`: the catalog name called, so a denial names the capability to ask for)."""
    if outcome.ok:
        return orjson.dumps(outcome.output).decode()
    body = response_body(outcome)
    view = {k: body[k] for k in ("status", "error", "call_id", "approval_id", "expires_at") if k in body}
    view["explanation"] = describe(outcome, tool)
    return orjson.dumps({"ok": False, **view}).decode()


class _Runner:
    def __init__(self, pipeline: Pipeline, flow: ApprovalFlow, identity: Identity,
                 body: ToolCallsBody, *, turn_id: str | None = None) -> None:
        self.pipeline = pipeline
        self.catalog = pipeline.catalog
        self.flow = flow
        self.identity = identity
        self.body = body
        self.turn_id = turn_id
        self.gate = asyncio.Semaphore(MAX_PARALLEL)

    async def run_all(self) -> list[Outcome]:
        calls = self.body.tool_calls
        outcomes: list[Outcome | None] = [None] * len(calls)
        group: list[int] = []

        async def flush() -> None:
            done = await asyncio.gather(*(self.run(calls[i]) for i in group))
            for i, outcome in zip(group, done, strict=True):
                outcomes[i] = outcome
            group.clear()

        for i, call in enumerate(calls):
            if self._is_write(call):
                await flush()
                outcomes[i] = await self.run(call)
            else:
                group.append(i)
        await flush()
        return [o for o in outcomes if o is not None]

    def _is_write(self, call: ToolCall) -> bool:
        if call.function.name == RESUME_TOOL:
            return True
        try:
            manifest = self.catalog.get(from_openai(call.function.name))
        except ApiError:
            return False  # refused without any effect
        return manifest is not None and manifest.action == "write"

    async def run(self, call: ToolCall) -> Outcome:
        async with self.gate:
            try:
                return await self._run(call)
            except ApiError as exc:  # refused before a call existed: bad name, team mismatch...
                return Outcome.refused(exc)
            except Exception:  # one call's bug must not take its siblings' answers with it
                log.exception("openai_tool_call_failed", tool=call.function.name)
                return Outcome.refused(ApiError("internal error"))

    async def _run(self, call: ToolCall) -> Outcome:
        try:
            args = orjson.loads(call.function.arguments or "{}")
        except orjson.JSONDecodeError as exc:
            return Outcome.refused(InvalidArgs(f"arguments are not valid JSON: {exc}"))
        if call.function.name == RESUME_TOOL:
            parsed = resume_arguments(args)
            if parsed is None:
                return Outcome.refused(resume_misuse())
            return await self.flow.resume(self.identity, *parsed)
        if not isinstance(args, dict):
            return Outcome.refused(InvalidArgs("arguments must be a JSON object"))
        key = self.body.idempotency_key
        request = InvokeRequest(tool=from_openai(call.function.name), args=args,
                                context=self.body.context,
                                idempotency_key=f"{key}:{call.id}"[:255] if key else None)
        return await self.pipeline.invoke(self.identity, request, turn_id=self.turn_id)
