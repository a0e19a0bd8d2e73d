"""The OpenAI-compatible upstream, through the official `openai` client: one client (one
connection pool) per service, its timeout and retries set per call from the time the call
has left, and its failures mapped to stable codes. The key lives in the client; no message
the service returns or logs is taken from the upstream's error bodies."""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass
from typing import Any

import openai
import structlog

from services.llm.config import LlmSettings
from services.sdk import ToolError

log = structlog.get_logger("toolproxy.llm")

UPSTREAM_ERROR = "upstream_error"
UPSTREAM_TIMEOUT = "upstream_timeout"
UPSTREAM_RATE_LIMITED = "upstream_rate_limited"

MARGIN_S = 0.15  # the reply reaches the proxy before the call's deadline
MIN_ATTEMPT_S = 0.2  # less time than this left: not worth starting
RETRY_MIN_S = 2.0  # one retry only when this much is left (a retry waits 0.4-0.5 s first)
MAX_CONTENT_CHARS = 100_000
_MAX_USAGE = 1_000_000_000

# HTTP statuses seen by the call in progress (httpx event hook): a retry that sleeps past the
# deadline after a 429 is still reported as rate limiting, not as a timeout.
_statuses: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("llm_statuses", default=None)


async def _note_status(response: Any) -> None:
    seen = _statuses.get()
    if seen is not None:
        seen.append(response.status_code)


@dataclass(frozen=True, slots=True)
class Completion:
    content: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    truncated: bool


def attempt_plan(remaining_s: float) -> tuple[float, int]:
    """(seconds for the whole exchange, retries) from the time the call has left."""
    budget = remaining_s - MARGIN_S
    return budget, (1 if budget >= RETRY_MIN_S else 0)


class Upstream:
    def __init__(self, settings: LlmSettings) -> None:
        assert settings.base_url is not None
        key = settings.api_key.get_secret_value() if settings.api_key is not None else "unused"
        # No redirects: the configured address is the only one the key is sent to.
        self._http = openai.DefaultAsyncHttpxClient(follow_redirects=False,
                                                    event_hooks={"response": [_note_status]})
        client = openai.AsyncOpenAI(base_url=settings.base_url, api_key=key, max_retries=0,
                                    timeout=10.0, http_client=self._http)
        # By retries allowed; both share the one connection pool. The timeout is per call.
        self._clients = (client, client.with_options(max_retries=1))

    async def close(self) -> None:
        await self._clients[0].close()

    async def complete(self, *, model: str, messages: list[dict[str, str]], max_tokens: int,
                       temperature: float | None, deadline: float) -> Completion:
        budget, retries = attempt_plan(deadline - time.time())
        if budget < MIN_ATTEMPT_S:
            raise ToolError("too little time is left to ask the model", code=UPSTREAM_TIMEOUT)
        client = self._clients[retries]
        extra: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        seen: list[int] = []
        token = _statuses.set(seen)
        try:
            async with asyncio.timeout(budget):
                response = await client.chat.completions.create(
                    model=model, messages=messages, max_tokens=max_tokens, timeout=budget,
                    **extra)  # type: ignore[arg-type]
        except (TimeoutError, openai.APITimeoutError):
            if seen and seen[-1] == 429:
                raise ToolError("the model's API is rate limiting us", code=UPSTREAM_RATE_LIMITED) from None
            raise ToolError(f"the model did not answer within {budget:.1f} s", code=UPSTREAM_TIMEOUT) from None
        except openai.RateLimitError:
            raise ToolError("the model's API is rate limiting us", code=UPSTREAM_RATE_LIMITED) from None
        except openai.APIStatusError as exc:
            log.warning("upstream_status", status=exc.status_code)
            raise ToolError(f"the model's API answered HTTP {exc.status_code}", code=UPSTREAM_ERROR) from None
        except openai.APIConnectionError:
            raise ToolError("the model's API could not be reached", code=UPSTREAM_ERROR) from None
        except openai.OpenAIError as exc:  # e.g. a response that is not a completion
            log.warning("upstream_unreadable", error=type(exc).__name__)
            raise ToolError("the model's API answered something unreadable", code=UPSTREAM_ERROR) from None
        finally:
            _statuses.reset(token)
        return _completion(response)


def _completion(response: Any) -> Completion:
    choices = getattr(response, "choices", None) or []
    if not choices or getattr(choices[0], "message", None) is None:
        raise ToolError("the model's API answered without a choice", code=UPSTREAM_ERROR)
    content = choices[0].message.content or ""
    if not isinstance(content, str):
        raise ToolError("the model's API answered without text", code=UPSTREAM_ERROR)
    # Postgres text cannot hold NUL: replaced, like any invalid character.
    content = content.replace("\x00", "\ufffd")
    truncated = len(content) > MAX_CONTENT_CHARS
    usage = getattr(response, "usage", None)
    return Completion(
        content=content[:MAX_CONTENT_CHARS],
        finish_reason=str(choices[0].finish_reason or "stop")[:32],
        prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
        completion_tokens=_count(getattr(usage, "completion_tokens", None)),
        total_tokens=_count(getattr(usage, "total_tokens", None)),
        truncated=truncated,
    )


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_USAGE:
        return value
    return None
