"""The model agent: a chat-completions loop whose every model step is an `llm.chat` call of
the turn's agent through the pipeline (proxy/turns/model_call.py), whose tools are exactly the
caller's `GET /v1/openai/tools`, and whose tool calls go through the very code of
`POST /v1/openai/tool_calls` (same policy, limits, approvals, usage).

A model call refused by the agent's rate limit waits its turn (up to MAX_RATE_WAIT_S a step:
the turn slows to the pace the policy allows); denied, past a quota or the run's budget, or
failed upstream, it ends the turn with its code; held for an approval, it pauses the turn, and
on resume its decided outcome is the model's reply.

Every tool call the model asks for counts against the turn's bound, whether it runs or not
(so a model that repeats itself or never stops reaches the bound); a refusal before the
pipeline (unknown tool, malformed arguments, the same call twice) is a tool message the model
reads and an `agent.error`; a held call pauses the turn, and on resume its decided outcome
becomes the tool message. The conversation is the turn's state, so any replica can resume it.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import orjson
from pydantic import ValidationError

from proxy.core.input_rules import describe
from proxy.core.outcome import Outcome
from proxy.core.tool_calls import (
    MAX_ARGUMENTS_BYTES,
    MAX_TOOL_CALLS,
    ToolCall,
    ToolCallsBody,
    content,
    openai_tools,
    run_tool_calls,
)
from proxy.turns.context import TurnContext, args_view, result_view
from proxy.turns.model_call import LLM_TOOL, Reply, model_args, reply_of
from proxy.turns.models import Done, Failed, Held, Verdict

SYSTEM_PROMPT = (
    "You are an agent working through Toolproxy, a governed tool gateway. Use the tools offered "
    "to do the user's task. A call may be denied, limited or held for a human approval: the "
    "runtime waits for that decision and gives you its outcome; you can never approve anything "
    "yourself. When the task is done, answer in plain text without calling a tool."
)
MAX_RATE_WAIT_S = 30.0  # a model step waits this long at most for the agent's rate limit
MAX_TOOL_CONTENT_BYTES = 16 << 10  # a tool message the model reads; larger ones by reference
MAX_ASSISTANT_CHARS = 16_000
EXCERPT_CHARS = 4000


def _refusal(code: str, message: str, **extra: Any) -> str:
    return orjson.dumps({"ok": False, "error": {"code": code, "message": message}, **extra}).decode()


def bounded_content(outcome: Outcome) -> str:
    """The tool message: `content()` as the OpenAI surface renders it, or, past the bound, a
    reference to the call with an excerpt (the whole result stays with the gateway)."""
    text = content(outcome)
    size = len(text.encode())
    if size <= MAX_TOOL_CONTENT_BYTES:
        return text
    return orjson.dumps({
        "ok": outcome.ok, "status": outcome.status or None, "truncated": True,
        "bytes": size, "call_id": outcome.call_id, "result_id": outcome.result_id,
        "excerpt": text[:EXCERPT_CHARS],
        "explanation": f"the result is {size} bytes; the gateway keeps it whole "
                       f"(GET /v1/calls/{outcome.call_id})",
    }).decode()


def _call_key(name: str, arguments: str) -> str:
    """The same tool with the same arguments (key order aside) is the same call."""
    try:
        canonical = orjson.dumps(orjson.loads(arguments or "{}"), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONDecodeError:
        canonical = arguments.encode()
    return hashlib.sha256(name.encode() + b"\n" + canonical).hexdigest()


def _bounded_message(message: dict[str, Any]) -> dict[str, Any]:
    text = message.get("content")
    if isinstance(text, str) and len(text) > MAX_ASSISTANT_CHARS:
        message["content"] = text[:MAX_ASSISTANT_CHARS]
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        if len(fn.get("arguments") or "") > MAX_ARGUMENTS_BYTES:
            fn["arguments"] = ""  # refused below; not kept in the conversation either
    return message


class ModelAgent:
    name = "model"

    def __init__(self, model: str | None) -> None:
        self.model = model  # one of llm.chat's allowlist or "auto"; None: llm.chat's default

    async def run(self, ctx: TurnContext) -> Verdict:
        s = ctx.state
        if "messages" not in s:
            s["messages"] = [{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": ctx.turn.input}]
            s["seen"] = {}
            s["model_steps"] = 0
        resumed: Outcome | None = None  # a held model call, decided
        if ctx.turn.held:
            still, resumed = await self._resume_held(ctx)
            if still:
                return Held(still)
            await ctx.flush()
        tools = (await openai_tools(ctx.pipeline, ctx.identity))["tools"]
        while True:
            if resumed is None:
                # The run's budget (and its being active) is the pipeline's to check, as for
                # any call: a run out of tokens refuses this call run_budget_exceeded.
                s["model_steps"] += 1
                outcome = await self._ask(ctx, model_args(s["messages"], tools, self.model))
            else:
                outcome, resumed = resumed, None
                ctx.count_model(outcome)
            reply = self._reply(ctx, outcome)
            if not isinstance(reply, Reply):
                return reply
            message = _bounded_message(reply.message)
            s["messages"].append(message)
            calls = message.get("tool_calls") or []
            text = message.get("content") or ""
            ctx.step("agent", {"model_step": s["model_steps"], "content": text[:2000],
                               "tool_calls": [c["function"]["name"][:64] for c in calls],
                               "tokens": reply.tokens, "finish_reason": reply.finish_reason},
                     call_id=reply.call_id)
            if not calls:
                return Done({"answer": text, "model_steps": s["model_steps"],
                             "tokens_used": ctx.turn.tokens_used})
            await ctx.emit("agent.plan.updated", {
                "model_step": s["model_steps"], "content": text[:500],
                "tool_calls": [c["function"]["name"][:64] for c in calls]})
            verdict = await self._tool_calls(ctx, calls)
            if verdict is not None:
                return verdict
            await ctx.flush()

    @staticmethod
    async def _ask(ctx: TurnContext, args: dict[str, Any]) -> Outcome:
        """The model call; refused by the rate limit, asked again once the limit allows it
        (each refusal recorded like any call's, and as a step)."""
        waited = 0.0
        while True:
            outcome = await ctx.ask_model(args)
            wait = outcome.retry_after_s
            if (outcome.code != "rate_limited" or outcome.status != "DENIED" or wait is None
                    or waited + wait > MAX_RATE_WAIT_S):
                return outcome
            ctx.step("agent", {"model_step": ctx.state["model_steps"], **result_view(outcome),
                               "retry_in_s": wait}, call_id=outcome.call_id)
            await ctx.flush()  # a cancellation requested meanwhile ends the turn here
            await asyncio.sleep(wait)
            waited += wait

    @staticmethod
    def _reply(ctx: TurnContext, outcome: Outcome) -> Reply | Held | Failed:
        """The model call's outcome: its reply, a pause on its approval, or the turn's end
        (recorded as the step's result, naming the call)."""
        if outcome.status == "AUTHORIZATION_REQUIRED":
            ctx.record_result(LLM_TOOL, outcome, model_step=ctx.state["model_steps"])
            return Held([{"call_id": outcome.call_id, "approval_id": outcome.approval_id,
                          "expires_at": outcome.expires_at, "tool": LLM_TOOL}])
        reply = reply_of(outcome)
        if isinstance(reply, Failed):
            ctx.step("agent", {"model_step": ctx.state["model_steps"], **result_view(outcome)},
                     call_id=outcome.call_id)
        return reply

    async def _tool_calls(self, ctx: TurnContext, calls: list[dict[str, Any]]) -> Verdict | None:
        s = ctx.state
        answers: dict[str, str | None] = {}
        order: list[str] = []
        runnable: list[tuple[ToolCall, str]] = []
        limit_hit = False
        for raw in calls:
            tc_id = str(raw.get("id") or "")[:256]
            fn = raw.get("function") or {}
            name, arguments = str(fn.get("name") or ""), str(fn.get("arguments") or "")
            if ctx.calls_left == 0:
                limit_hit = True
                if tc_id and tc_id not in answers:
                    order.append(tc_id)
                    answers[tc_id] = _refusal("call_limit_reached",
                                              f"this turn made its {ctx.max_calls} tool calls")
                continue
            ctx.take_call()
            if not tc_id or tc_id in answers:
                await self._refuse(ctx, None, name, "duplicate_call",
                                   "a tool call id is missing or repeated in one message")
                continue
            order.append(tc_id)
            key = _call_key(name, arguments)
            if key in s["seen"]:
                answers[tc_id] = await self._refuse(
                    ctx, tc_id, name, "duplicate_call",
                    f"the same call was already made in this turn (tool_call {s['seen'][key]}); "
                    "its result is in the conversation above")
                continue
            s["seen"][key] = tc_id
            try:
                tc = ToolCall.model_validate(raw)
            except ValidationError as exc:
                answers[tc_id] = await self._refuse(ctx, tc_id, name, "invalid_request", describe(exc))
                continue
            try:
                parsed: Any = orjson.loads(arguments or "{}")
            except orjson.JSONDecodeError:
                parsed = arguments[:200]
            ctx.step("tool_request", {"tool_call_id": tc_id, "name": name[:64], **args_view(parsed)})
            runnable.append((tc, name))
        held = await self._run(ctx, runnable, answers)
        for tc_id in order:
            s["messages"].append({"role": "tool", "tool_call_id": tc_id, "content": answers[tc_id]})
        if held:
            return Held(held)
        if limit_hit:
            return Failed("call_limit_reached", f"the turn made its {ctx.max_calls} tool calls")
        return None

    async def _run(self, ctx: TurnContext, runnable: list[tuple[ToolCall, str]],
                   answers: dict[str, str | None]) -> list[dict[str, Any]]:
        held: list[dict[str, Any]] = []
        for i in range(0, len(runnable), MAX_TOOL_CALLS):
            batch = runnable[i:i + MAX_TOOL_CALLS]
            body = ToolCallsBody(tool_calls=[tc for tc, _ in batch], context=ctx.call_context)
            outcomes = await run_tool_calls(ctx.pipeline, ctx.flow, ctx.identity, body,
                                            turn_id=ctx.turn.turn_id)
            for (tc, name), outcome in zip(batch, outcomes, strict=True):
                ctx.record_result(name[:64], outcome, tool_call_id=tc.id)
                if outcome.status == "AUTHORIZATION_REQUIRED":
                    held.append({"call_id": outcome.call_id, "approval_id": outcome.approval_id,
                                 "expires_at": outcome.expires_at, "tool": name[:64],
                                 "tool_call_id": tc.id})
                    answers[tc.id] = None  # answered on resume
                    continue
                answers[tc.id] = bounded_content(outcome)
                if outcome.call_id is None:  # refused before a call existed
                    await ctx.emit("agent.error", {"tool_call_id": tc.id, "name": name[:64],
                                                   "code": outcome.code,
                                                   "message": outcome.message[:500]})
        return held

    async def _refuse(self, ctx: TurnContext, tc_id: str | None, name: str, code: str,
                      message: str) -> str:
        ctx.step("error", {"tool_call_id": tc_id, "name": name[:64], "code": code, "message": message})
        await ctx.emit("agent.error", {"tool_call_id": tc_id, "name": name[:64], "code": code,
                                       "message": message[:500]})
        return _refusal(code, message)

    async def _resume_held(self, ctx: TurnContext) -> tuple[list[dict[str, Any]], Outcome | None]:
        """The held calls still pending, and the held model call's outcome once decided (a
        held entry without a tool_call_id is the model call itself)."""
        still: list[dict[str, Any]] = []
        model_outcome: Outcome | None = None
        for h in ctx.turn.held:
            outcome = await ctx.resume_call(str(h["call_id"]))
            if outcome.status == "AUTHORIZATION_REQUIRED":
                still.append(h)
                continue
            if "tool_call_id" not in h:
                model_outcome = outcome
                continue
            ctx.record_result(h["tool"], outcome, tool_call_id=h["tool_call_id"], resumed=True)
            for m in reversed(ctx.state["messages"]):
                if m.get("role") == "tool" and m.get("tool_call_id") == h["tool_call_id"]:
                    m["content"] = bounded_content(outcome)
                    break
        ctx.turn.held = still
        return still, model_outcome
