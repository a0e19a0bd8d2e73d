"""The model agent's model step: one `llm.chat` call through the pipeline as the turn's agent,
in its run (policy, grants, rate limits, token quota, the run's budget, usage and the decision
log, like any other call), and its outcome read back as the model's reply or as the turn's end.

The call is not the turn's tool call: it carries the run, not the turn id (the turn's events
stay the agent's plan and its tool calls; the step that records the reply names the call), and
it does not count against the turn's tool-call bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.core.outcome import Outcome
from proxy.turns.models import Failed

LLM_TOOL = "llm.chat"

# llm.chat's failures that mean "the model did not answer" (trying later may work): the turn
# ends upstream_unavailable; a refused request ends upstream_error. An upstream_error says which
# by its first words (services/llm/errors.py UNAVAILABLE, the tool's contract; the gateway's
# core and turns import no tool family, so it is spelled here and tests/test_llm.py pins both).
_UNAVAILABLE_CODES = ("upstream_rate_limited", "upstream_timeout")
_UNAVAILABLE_PREFIX = "the model's API is unavailable"


@dataclass(slots=True)
class Reply:
    """The assistant message as plain JSON (to keep in the conversation) and its call."""

    message: dict[str, Any]
    tokens: int
    finish_reason: str | None
    call_id: str | None


def model_args(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
               model: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"messages": messages}
    if tools:
        args["tools"] = tools
    if model is not None:
        args["model"] = model
    return args


def reply_of(outcome: Outcome) -> Reply | Failed:
    """A completed call's reply, or how the turn ends (a held call is the caller's to handle)."""
    if not outcome.ok:
        return failure(outcome)
    output = outcome.output if isinstance(outcome.output, dict) else {}
    answer = output.get("message")
    if not isinstance(answer, dict):  # kept aside as an artifact: past the inline output bound
        return Failed("upstream_error", f"{LLM_TOOL}'s answer (call {outcome.call_id}) is too "
                                        "large to continue the conversation with")
    message: dict[str, Any] = {"role": "assistant", "content": answer.get("content") or None}
    calls = answer.get("tool_calls") or []
    if calls:
        message["tool_calls"] = calls
    return Reply(message=message, tokens=outcome.tokens_used,
                 finish_reason=output.get("finish_reason"), call_id=outcome.call_id)


def failure(outcome: Outcome) -> Failed:
    """The turn's end for a model call that did not complete: the code a turn's user reads.
    A refusal (policy, limits, the run's budget) keeps its own code; a model that did not answer
    is upstream_unavailable, one that refused the request upstream_error."""
    code = outcome.code or "upstream_error"
    message = f"{LLM_TOOL}: {outcome.message}"
    if code == "tool_error":
        tool_code = outcome.tool_code or ""
        if tool_code in _UNAVAILABLE_CODES or (
                tool_code == "upstream_error" and outcome.message.startswith(_UNAVAILABLE_PREFIX)):
            return Failed("upstream_unavailable", message)
        if tool_code in ("upstream_error", ""):
            return Failed("upstream_error", message)
        return Failed(tool_code, message)  # model_not_allowed, no_route...
    if code == "timeout":  # the call's deadline passed before the model answered
        return Failed("upstream_unavailable", message)
    if code in ("bad_tool_output", "output_too_large"):
        return Failed("upstream_error", message)
    return Failed(code, message)
