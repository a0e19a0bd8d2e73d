"""A chat completion read into what llm.chat answers: the text, the tool calls and the usage,
each bounded and storable (no NUL), whatever the upstream sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.llm.errors import UpstreamFailed
from services.llm.manifests import MAX_ARGUMENTS, MAX_TOOL_CALL_ID, MAX_TOOL_CALLS

MAX_CONTENT_CHARS = 100_000
# All of one answer's tool call arguments: with the text, the reply stays far below the bus's
# message bound (and a model agent's conversation below its own).
MAX_ARGUMENTS_TOTAL = 256_000
_MAX_USAGE = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Completion:
    content: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    truncated: bool
    tool_calls: tuple[dict[str, Any], ...] = ()


def _storable(text: str) -> str:
    """Postgres text cannot hold NUL: replaced, like any invalid character."""
    return text.replace("\x00", "\ufffd")


def completion(response: Any) -> Completion:
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    if message is None:
        raise UpstreamFailed("the model's API answered without a choice")
    content = message.content or ""
    if not isinstance(content, str):
        raise UpstreamFailed("the model's API answered without text")
    content = _storable(content)
    usage = getattr(response, "usage", None)
    return Completion(
        content=content[:MAX_CONTENT_CHARS],
        finish_reason=str(choices[0].finish_reason or "stop")[:32],
        prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
        completion_tokens=_count(getattr(usage, "completion_tokens", None)),
        total_tokens=_count(getattr(usage, "total_tokens", None)),
        truncated=len(content) > MAX_CONTENT_CHARS,
        tool_calls=tool_calls(getattr(message, "tool_calls", None) or []),
    )


def tool_calls(calls: list[Any]) -> tuple[dict[str, Any], ...]:
    """The calls the model asks for, as OpenAI function calls. An answer beyond the bounds is
    unusable: refused whole rather than cut (a cut call would run with other arguments)."""
    if len(calls) > MAX_TOOL_CALLS:
        raise UpstreamFailed(f"the model asked for {len(calls)} tool calls at once "
                             f"(at most {MAX_TOOL_CALLS})")
    out = []
    total = 0
    for i, tc in enumerate(calls):
        fn = getattr(tc, "function", None) or getattr(tc, "custom", None)
        if fn is None:
            raise UpstreamFailed("the model's API answered a tool call without a function")
        # A custom tool call (name, input): only functions are offered, so none has its name.
        name = getattr(fn, "name", None)
        arguments = getattr(fn, "arguments", None)
        if arguments is None:
            arguments = getattr(fn, "input", None)
        arguments = arguments or ""
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise UpstreamFailed("the model's API answered a tool call without a name")
        total += len(arguments)
        if len(arguments) > MAX_ARGUMENTS or total > MAX_ARGUMENTS_TOTAL:
            raise UpstreamFailed(f"the model's tool call arguments exceed {MAX_ARGUMENTS} "
                                 f"characters (or {MAX_ARGUMENTS_TOTAL} in all)")
        # A call without an id gets one: a tool message must name the call it answers.
        call_id = _storable(str(getattr(tc, "id", None) or ""))[:MAX_TOOL_CALL_ID] or f"call_{i}"
        out.append({"id": call_id,
                    "type": "function",
                    "function": {"name": _storable(name)[:256], "arguments": _storable(arguments)}})
    return tuple(out)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_USAGE:
        return value
    return None
