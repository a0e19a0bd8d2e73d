"""Tool calls to the OpenAI-compatible surface, built with the `openai` package's own types."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function

from tests.support.calls import bearer


def tool_call(name: str, arguments: Any, call_id: str | None = None) -> ChatCompletionMessageFunctionToolCall:
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return ChatCompletionMessageFunctionToolCall(
        id=call_id or f"call_{uuid.uuid4().hex[:12]}", type="function",
        function=Function(name=name, arguments=text))


def assistant(*calls: ChatCompletionMessageFunctionToolCall) -> ChatCompletionMessage:
    """The assistant message a chat completion returns, as the openai package models it."""
    return ChatCompletionMessage(role="assistant", content=None, tool_calls=list(calls))


async def post_calls(client: Any, tok: str, message: ChatCompletionMessage, **extra: Any) -> tuple[int, dict]:
    body = {"tool_calls": [c.model_dump(mode="json") for c in message.tool_calls or []], **extra}
    r = await client.post("/v1/openai/tool_calls", json=body, headers=bearer(tok))
    return r.status, await r.json()
