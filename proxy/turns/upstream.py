"""The model agent's upstream: an OpenAI-compatible chat-completions endpoint, reached with the
official `openai` client (one per app), as one JSON answer or as server-sent events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
import structlog
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion

from proxy.config import Settings

log = structlog.get_logger("toolproxy.turns.upstream")


class UpstreamError(Exception):
    """The upstream answered, but not with a usable completion (`upstream_error`)."""

    code = "upstream_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UpstreamUnavailable(UpstreamError):
    """No answer: refused connection, timeout, 5xx or 429 after the client's retries."""

    code = "upstream_unavailable"


@dataclass(slots=True)
class Reply:
    """An assistant message as plain JSON (to keep in the conversation) and its token usage."""

    message: dict[str, Any]
    tokens: int
    finish_reason: str | None


class ModelClient:
    def __init__(self, settings: Settings) -> None:
        assert settings.model_base_url and settings.model_name
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else "unused"
        self.model = settings.model_name
        self.stream = settings.model_stream
        # No redirects: the configured address is the only one the key and the turn's
        # messages are sent to (as for llm.chat's upstream).
        self._client = AsyncOpenAI(base_url=settings.model_base_url, api_key=key,
                                   timeout=settings.model_timeout_s,
                                   max_retries=settings.model_max_retries,
                                   http_client=DefaultAsyncHttpxClient(follow_redirects=False))

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        try:
            completion = await (self._streamed(kwargs) if self.stream else
                                self._client.chat.completions.create(**kwargs))
        except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError) as exc:
            # APITimeoutError is an APIConnectionError. The message names no key or header.
            raise UpstreamUnavailable(f"the model upstream did not answer: {type(exc).__name__}") from None
        except openai.APIStatusError as exc:
            raise UpstreamError(f"the model upstream refused the request (HTTP {exc.status_code})") from None
        except (openai.OpenAIError, ValueError, AssertionError) as exc:
            raise UpstreamError(f"the model upstream's answer is unusable: {type(exc).__name__}") from None
        return _reply(completion)

    async def _streamed(self, kwargs: dict[str, Any]) -> ChatCompletion:
        """Chunks accumulated by the client's own helper (tool call deltas included)."""
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        stream = await self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True})
        async with stream:
            async for chunk in stream:
                state.handle_chunk(chunk)
        return state.get_final_completion()


def _reply(completion: ChatCompletion) -> Reply:
    if not completion.choices:
        raise UpstreamError("the model upstream answered with no choices")
    choice = completion.choices[0]
    msg = choice.message
    message: dict[str, Any] = {"role": "assistant", "content": msg.content}
    calls = []
    for tc in msg.tool_calls or []:
        if tc.type == "function":
            calls.append({"id": tc.id, "type": "function",
                          "function": {"name": tc.function.name, "arguments": tc.function.arguments}})
        else:  # a custom tool call: we offer functions only, so no catalog tool has its name
            calls.append({"id": tc.id, "type": "function",
                          "function": {"name": tc.custom.name, "arguments": tc.custom.input}})
    if calls:
        message["tool_calls"] = calls
    tokens = completion.usage.total_tokens if completion.usage is not None else 0
    return Reply(message=message, tokens=max(0, int(tokens or 0)), finish_reason=choice.finish_reason)
