"""A Python client for Toolproxy's native API, async (`AsyncToolproxy`) and sync (`Toolproxy`).

    async with AsyncToolproxy("http://127.0.0.1:8080", token) as tp:
        result = await tp.invoke("math", {"expr": "2+3*4"})      # CallResult(output={"value": 14})
        try:
            await tp.invoke("greenfood.order", order)
        except ApprovalRequired as held:
            result = await tp.wait_for_approval(held.call_id)    # runs it once approved

Every outcome but COMPLETED raises a typed error named after its code (`Denied`, `RateLimited`,
`ToolFailed`, ...; all `ToolproxyError`). Retries: a refusal that executed nothing (429 with
Retry-After, 503) and a lost connection are retried with backoff, always with the same
idempotency key (one is made per call when none is given), so a retried call is the same call.
"""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

T = TypeVar("T")


# --- errors ---------------------------------------------------------------------------------


class ToolproxyError(Exception):
    """Base: `code` is the API's error code; `body` the whole response."""

    code = "error"

    def __init__(self, message: str, *, http_status: int = 0, body: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.body = body or {}
        self.retry_after = retry_after

    @property
    def status(self) -> str | None:
        return self.body.get("status")

    @property
    def call_id(self) -> str | None:
        return self.body.get("call_id")

    @property
    def reasons(self) -> list[str]:
        return list((self.body.get("error") or {}).get("reasons") or [])


class InvalidRequest(ToolproxyError):
    code = "invalid_request"


class InvalidArgs(InvalidRequest):
    code = "invalid_args"


class Unauthenticated(ToolproxyError):
    code = "unauthenticated"


class Forbidden(ToolproxyError):
    code = "forbidden"


class Denied(ToolproxyError):
    code = "denied"


class NotFound(ToolproxyError):
    code = "not_found"


class UnknownTool(NotFound):
    code = "unknown_tool"


class Conflict(ToolproxyError):
    code = "conflict"


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"


class CallInProgress(Conflict):
    code = "call_in_progress"


class PayloadTooLarge(ToolproxyError):
    code = "payload_too_large"


class RateLimited(ToolproxyError):
    code = "rate_limited"


class QuotaExceeded(RateLimited):
    code = "quota_exceeded"


class Unavailable(ToolproxyError):
    code = "unavailable"


class ToolUnavailable(Unavailable):
    code = "tool_unavailable"


class PdpUnavailable(Unavailable):
    code = "pdp_unavailable"


class ToolFailed(ToolproxyError):
    """The tool ran and reported an error (`tool_code` is its own code)."""

    code = "tool_error"

    @property
    def tool_code(self) -> str | None:
        return (self.body.get("error") or {}).get("tool_code")


class ToolTimeout(ToolproxyError, TimeoutError):
    code = "timeout"


class Cancelled(ToolproxyError):
    code = "cancelled"


class ApprovalRequired(ToolproxyError):
    """Held for a governance approval: nothing ran. `wait_for_approval(call_id)` runs it."""

    code = "authorization_required"

    @property
    def approval_id(self) -> str | None:
        return self.body.get("approval_id")

    @property
    def expires_at(self) -> str | None:
        return self.body.get("expires_at")


class ApprovalTimeout(ToolproxyError, TimeoutError):
    code = "approval_timeout"


_BY_CODE: dict[str, type[ToolproxyError]] = {
    c.code: c for c in (InvalidRequest, InvalidArgs, Unauthenticated, Forbidden, Denied, NotFound,
                        UnknownTool, Conflict, IdempotencyConflict, CallInProgress, PayloadTooLarge,
                        RateLimited, QuotaExceeded, ToolUnavailable, PdpUnavailable, ToolFailed,
                        ToolTimeout, Cancelled, ApprovalRequired)
}
_BY_CODE.update(policy_undefined=PdpUnavailable, bad_tool_output=ToolFailed,
                limits_unavailable=Unavailable, dependency_unavailable=Unavailable)
_BY_HTTP = {400: InvalidRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
            413: PayloadTooLarge, 429: RateLimited, 502: Unavailable, 503: Unavailable, 504: ToolTimeout}
# Refusals that executed nothing: safe to send again.
_RETRYABLE = {429, 502, 503}


def error_for(http_status: int, body: dict[str, Any], retry_after: float | None = None) -> ToolproxyError:
    error = body.get("error") or {}
    code = error.get("code")
    cls = _BY_CODE.get(code) or _BY_HTTP.get(http_status, ToolproxyError)
    message = error.get("message") or f"HTTP {http_status}"
    return cls(f"{code or http_status}: {message}", http_status=http_status, body=body,
               retry_after=retry_after)


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallResult:
    output: Any
    call_id: str
    result_id: str
    decision_id: str
    tokens_used: int = 0
    cost_1t: float = 0.0
    body: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> CallResult:
        return cls(output=body.get("output"), call_id=body["call_id"], result_id=body["result_id"],
                   decision_id=body["decision_id"], tokens_used=body.get("tokens_used", 0),
                   cost_1t=body.get("cost_1t", 0.0), body=body)


# --- the async client -----------------------------------------------------------------------


class AsyncToolproxy:
    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.2, max_retry_after_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_retry_after_s = max_retry_after_s
        self._headers = {"Authorization": f"Bearer {token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncToolproxy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def list_tools(self) -> list[dict[str, Any]]:
        """The catalog entries this caller may call."""
        status, body, _ = await self._request("GET", "/v1/tools")
        if status != 200:
            raise error_for(status, body)
        return list(body["tools"])

    async def invoke(self, tool: str, args: dict[str, Any] | None = None, *,
                     context: dict[str, Any] | None = None,
                     idempotency_key: str | None = None) -> CallResult:
        payload: dict[str, Any] = {"tool": tool, "args": args or {},
                                   "idempotency_key": idempotency_key or uuid.uuid4().hex}
        if context:
            payload["context"] = context
        return self._result(*await self._request("POST", "/v1/tools/invoke", payload))

    async def resume(self, call_id: str, args: dict[str, Any] | None = None) -> CallResult:
        """Run a call held for approval (exactly once: later resumes return the same result)."""
        payload = {"args": args} if args is not None else None
        return self._result(*await self._request("POST", f"/v1/calls/{call_id}/resume", payload))

    async def wait_for_approval(self, call_id: str, *, timeout_s: float = 900.0, poll_s: float = 1.0,
                                args: dict[str, Any] | None = None) -> CallResult:
        """Wait until governance decides, then run the call: its result, or `Denied` (denied or
        expired), or `ApprovalTimeout` if no decision came within `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        delay = poll_s
        while True:
            try:
                return await self.resume(call_id, args)
            except (ApprovalRequired, CallInProgress):
                pass
            if loop.time() + delay > deadline:
                raise ApprovalTimeout(f"no decision on call {call_id} within {timeout_s:g} s",
                                      body={"call_id": call_id})
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 5.0)

    # --- plumbing -----------------------------------------------------------------------

    def _result(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> CallResult:
        if status == 200 and body.get("ok") is True:
            return CallResult.from_body(body)
        raise error_for(status, body, _retry_after(headers))

    async def _request(self, method: str, path: str, payload: Any = None
                       ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        attempt = 0
        while True:
            try:
                async with self._session.request(method, self.url + path, json=payload) as resp:
                    try:
                        body = await resp.json(content_type=None)
                    except ValueError:
                        body = None
                    status, headers = resp.status, dict(resp.headers)
            except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
                if attempt >= self.retries:
                    raise Unavailable(f"cannot reach {self.url}: {exc!r}") from exc
                await asyncio.sleep(self._backoff(attempt))
                attempt += 1
                continue
            if not isinstance(body, dict):
                body = {"ok": False, "error": {"code": "http_error", "message": f"HTTP {status}"}}
            if status in _RETRYABLE and attempt < self.retries:
                wait = _retry_after(headers)
                if wait is None or wait <= self.max_retry_after_s:
                    await asyncio.sleep(wait if wait is not None else self._backoff(attempt))
                    attempt += 1
                    continue
            return status, body, headers

    def _backoff(self, attempt: int) -> float:
        return float(min(5.0, self.backoff_s * 2**attempt * random.uniform(0.5, 1.5)))


def _retry_after(headers: dict[str, str]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# --- the sync client ------------------------------------------------------------------------


class Toolproxy:
    """The same client for synchronous code: an event loop of its own, on a daemon thread."""

    def __init__(self, url: str, token: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="toolproxy-client",
                                        daemon=True)
        self._thread.start()
        self._client = AsyncToolproxy(url, token, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def list_tools(self) -> list[dict[str, Any]]:
        return self._run(self._client.list_tools())

    def invoke(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> CallResult:
        return self._run(self._client.invoke(tool, args, **kw))

    def resume(self, call_id: str, args: dict[str, Any] | None = None) -> CallResult:
        return self._run(self._client.resume(call_id, args))

    def wait_for_approval(self, call_id: str, **kw: Any) -> CallResult:
        return self._run(self._client.wait_for_approval(call_id, **kw))

    def close(self) -> None:
        if self._thread.is_alive():
            self._run(self._client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> Toolproxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
