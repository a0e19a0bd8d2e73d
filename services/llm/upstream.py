"""The OpenAI-compatible upstream, through the official `openai` client — the project's one
client of such an API (llm.chat; the model agent's steps are llm.chat calls): one client (one
connection pool) per service, opened when it starts, its timeout and retries set per call from
the time the call has left, the answer read as one JSON body or as server-sent events
(TOOLPROXY_LLM_STREAM), and its failures mapped to stable codes. The key lives in the client;
no message the service returns or logs is taken from the upstream's error bodies."""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import openai
import structlog
from nats.aio.client import Client as NATS
from openai.lib.streaming.chat import ChatCompletionStreamState

from services.llm.config import LlmSettings
from services.llm.errors import REFUSED, UNAVAILABLE, UpstreamFailed, UpstreamRateLimited
from services.llm.ops import Completion, completion
from services.sdk.errors import UpstreamTimeout

log = structlog.get_logger("toolproxy.llm")

MARGIN_S = 0.15  # the reply reaches the proxy before the call's deadline
MIN_ATTEMPT_S = 0.2  # less time than this left: not worth starting
RETRY_MIN_S = 2.0  # one retry only when this much is left (a retry waits 0.4-0.5 s first)

# HTTP statuses seen by the call in progress (httpx event hook): a retry that sleeps past the
# deadline after a 429 is still reported as rate limiting, not as a timeout.
_statuses: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("llm_statuses", default=None)


async def _note_status(response: Any) -> None:
    seen = _statuses.get()
    if seen is not None:
        seen.append(response.status_code)


def attempt_plan(remaining_s: float) -> tuple[float, int]:
    """(seconds for the whole exchange, retries) from the time the call has left."""
    budget = remaining_s - MARGIN_S
    return budget, (1 if budget >= RETRY_MIN_S else 0)


class Upstream:
    def __init__(self, settings: LlmSettings) -> None:
        assert settings.base_url is not None
        self._settings = settings
        self.stream = settings.stream
        self._clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI] | None = None

    async def open(self, _nc: NATS | None = None) -> None:
        """A fresh client (and pool) each time the service starts."""
        s = self._settings
        key = s.api_key.get_secret_value() if s.api_key is not None else "unused"
        # No redirects: the configured address is the only one the key is sent to.
        http = openai.DefaultAsyncHttpxClient(follow_redirects=False,
                                              event_hooks={"response": [_note_status]})
        client = openai.AsyncOpenAI(base_url=s.base_url, api_key=key, max_retries=0,
                                    timeout=10.0, http_client=http)
        # By retries allowed; both share the one connection pool. The timeout is per call.
        self._clients = (client, client.with_options(max_retries=1))

    async def close(self) -> None:
        if self._clients is not None:
            await self._clients[0].close()
            self._clients = None

    async def complete(self, *, model: str, messages: list[dict[str, Any]], max_tokens: int,
                       temperature: float | None, deadline: float,
                       tools: list[dict[str, Any]] | None = None,
                       tool_choice: Any = None) -> Completion:
        if self._clients is None:
            raise UpstreamFailed(f"{UNAVAILABLE}: the service is not started")
        budget, retries = attempt_plan(deadline - time.time())
        if budget < MIN_ATTEMPT_S:
            raise UpstreamTimeout("too little time is left to ask the model")
        client = self._clients[retries]
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens,
                                  "timeout": budget}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        seen: list[int] = []
        token = _statuses.set(seen)
        try:
            async with asyncio.timeout(budget):
                response = await (self._streamed(client, kwargs) if self.stream
                                  else client.chat.completions.create(**kwargs))
        except (TimeoutError, openai.APITimeoutError):
            if seen and seen[-1] == 429:
                raise UpstreamRateLimited("the model's API is rate limiting us") from None
            raise UpstreamTimeout(f"the model did not answer within {budget:.1f} s") from None
        except openai.RateLimitError:
            raise UpstreamRateLimited("the model's API is rate limiting us") from None
        except openai.APIStatusError as exc:
            log.warning("upstream_status", status=exc.status_code)
            side = UNAVAILABLE + ": it answered" if exc.status_code >= 500 else REFUSED + ":"
            raise UpstreamFailed(f"{side} HTTP {exc.status_code}") from None
        except openai.APIConnectionError:  # a stream broken off mid-way too
            raise UpstreamFailed(f"{UNAVAILABLE}: it could not be reached") from None
        except (openai.OpenAIError, ValueError, AssertionError) as exc:
            # e.g. a response that is not a completion, chunks that do not add up to one
            log.warning("upstream_unreadable", error=type(exc).__name__)
            raise UpstreamFailed("the model's API answered something unreadable") from None
        finally:
            _statuses.reset(token)
        return completion(response)

    @staticmethod
    async def _streamed(client: openai.AsyncOpenAI, kwargs: dict[str, Any]) -> Any:
        """Server-sent chunks, accumulated by the client's own helper (tool call deltas
        included) into the completion one JSON answer would have been."""
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        stream = await client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True})
        async with stream:
            async for chunk in stream:
                state.handle_chunk(chunk)
        return state.get_final_completion()
