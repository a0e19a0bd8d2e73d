"""Small services for tests: echo the call context, sleep past deadlines, vanish on demand."""

from __future__ import annotations

import asyncio
from typing import Any

from services.sdk import CallContext, Service, ToolError, tool

OBJ: dict[str, Any] = {"type": "object", "additionalProperties": False}

seen: list[CallContext] = []  # every context the echo tool received (newest last)
said: list[tuple[str | None, str]] = []  # every echo run: (its `say`, its call id)
slow_outcomes: list[str] = []  # "finished" or "stopped_at_deadline"


@tool(
    tool_id="testsvc.echo",
    category="A",
    action="read",
    description="Echoes its args and the trusted call context it received.",
    input_schema={**OBJ, "properties": {"say": {"type": "string", "maxLength": 100}}},
)
async def echo(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    seen.append(ctx)
    said.append((args.get("say"), ctx.call_id))
    return {
        "said": args.get("say"),
        "call_id": ctx.call_id,
        "decision_id": ctx.decision_id,
        "team_id": ctx.team_id,
        "agent_id": ctx.agent_id,
        "run_id": ctx.run_id,
    }


@tool(
    tool_id="testsvc.slow",
    category="A",
    action="read",
    timeout_ms=300,
    description="Sleeps for `seconds`; records whether it finished or was stopped at its deadline.",
    cost={"per_call": 0.25},  # a price a call that times out is not charged
    input_schema={**OBJ, "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 5}}},
)
async def slow(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        await asyncio.sleep(float(args.get("seconds", 0)))
    except asyncio.CancelledError:
        slow_outcomes.append("stopped_at_deadline")
        raise
    slow_outcomes.append("finished")
    return {"slept": args.get("seconds", 0)}


patient_outcomes: list[str] = []  # "finished" or "cancelled"


@tool(
    tool_id="testsvc.patient",
    category="A",
    action="read",
    description="Sleeps for `seconds` within a 2 s deadline; records whether it was cancelled.",
    input_schema={**OBJ, "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 1.9}}},
)
async def patient(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        await asyncio.sleep(float(args.get("seconds", 0)))
    except asyncio.CancelledError:
        patient_outcomes.append("cancelled")
        raise
    patient_outcomes.append("finished")
    return {"slept": args.get("seconds", 0)}


@tool(
    tool_id="testsvc.fail",
    category="A",
    action="read",
    description="Always reports its own error.",
    input_schema=OBJ,
)
async def fail(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    raise ToolError("the widget is broken", code="widget_broken")


@tool(
    tool_id="testsvc.metered",
    category="B",
    action="read",
    description="Reports metering so pricing can be checked.",
    input_schema={**OBJ, "properties": {"tokens": {"type": "integer", "minimum": 0}}},
    cost={"per_call": 0.5, "per_token": 0.01, "per_compute_unit": 2.0},
)
async def metered(args: dict[str, Any], ctx: CallContext) -> Any:
    from services.sdk.service import ToolResult

    return ToolResult(output={"ok": True}, tokens_used=int(args.get("tokens", 0)), compute_units=0.25)


guarded_calls: list[dict[str, Any]] = []


@tool(
    tool_id="testsvc.guarded",
    category="B",
    action="write",
    requires_approval=True,
    description="A write tool that needs a governance approval per call; records each execution.",
    input_schema={**OBJ, "properties": {"amount": {"type": "integer", "minimum": 1, "maximum": 1000}},
                  "required": ["amount"]},
)
async def guarded(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    guarded_calls.append({"call_id": ctx.call_id, **args})
    return {"done": args["amount"]}


@tool(
    tool_id="testsvc.big",
    category="A",
    action="read",
    description="Returns a blob of `n` characters (outputs larger than the inline bound).",
    input_schema={**OBJ, "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 2000000}}},
)
async def big(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"blob": "x" * int(args.get("n", 0))}


@tool(
    tool_id="testsvc.dirty",
    category="A",
    action="read",
    description="Returns text with control characters.",
    input_schema=OBJ,
)
async def dirty(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"text": "bell\x07 nul\x00 esc\x1b ok\ttab\nline"}


@tool(
    tool_id="testsvc.liar",
    category="A",
    action="read",
    description="Promises an integer, returns a string (violates its own output schema).",
    input_schema=OBJ,
    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)
async def liar(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"n": "not a number"}


@tool(
    tool_id="testsvc.gone",
    category="A",
    action="read",
    description="A tool whose service stops right after announcing it.",
    input_schema=OBJ,
)
async def gone(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {}


def testsvc_service() -> Service:
    return Service(name="testsvc", tools=[echo, slow, patient, fail, metered, guarded, big, dirty, liar], heartbeat_s=0.5)


def gone_service() -> Service:
    return Service(name="testsvc-gone", tools=[gone], heartbeat_s=0.5)


TEST_TOOLS = ("testsvc.echo", "testsvc.slow", "testsvc.patient", "testsvc.fail", "testsvc.metered",
              "testsvc.guarded", "testsvc.big", "testsvc.dirty", "testsvc.liar")
