"""The typed outcome of a call: what the core answers every surface (native, MCP, OpenAI, turns,
the plugin relay), before any of them renders it. It holds no HTTP status: the native surface
chooses that (proxy.web.native) and hands the core its choice for the records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import ApiError

# Refusals by the rate limits and daily quotas: nothing ran, and it may run later.
LIMIT_CODES = ("rate_limited", "quota_exceeded")
HELD_MESSAGE = "a governance approval is required; resume the call once it is approved"
REF_KEYS = ("object_refs", "artifacts", "observations", "provenance_refs")


@dataclass(frozen=True, slots=True)
class Recorded:
    """A response as it was kept when its call ended (idempotency key, call row, approval),
    answered again exactly so: its body, and the HTTP status the native surface gave it then."""

    http_status: int
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call ended, or why none was made (`refusal`)."""

    # COMPLETED | FAILED | DENIED | UNAVAILABLE | CANCELLED | AUTHORIZATION_REQUIRED; "" for a
    # refusal before a call existed that names no call status (unknown tool, invalid args...).
    status: str
    code: str | None = None  # None only when COMPLETED
    message: str = ""
    call_id: str | None = None
    decision_id: str | None = None
    result_id: str | None = None
    output: Any = None
    executed: bool = False  # the tool was asked to run (tokens and cost are then reported)
    tokens_used: int = 0
    cost: float = 0.0  # cost_1t
    reasons: list[str] | None = None
    tool_code: str | None = None  # the tool's own error code, when it reported one
    retry_after: float | None = None  # seconds, when trying again later may work
    diagnostic: str | None = None
    refs: dict[str, list[Any]] = field(default_factory=dict)  # REF_KEYS, possibly empty
    approval_id: str | None = None  # AUTHORIZATION_REQUIRED: the approval to wait for
    expires_at: str | None = None
    disconnected: bool = False  # the client went away first: nobody receives this answer
    replayed: bool = False  # an idempotent replay of an earlier call's response
    recorded: Recorded | None = None  # answered as recorded (replays, resumes of ended calls)
    refusal: ApiError | None = None  # refused before a call existed: the error itself

    @property
    def ok(self) -> bool:
        return self.status == "COMPLETED"

    @property
    def retry_later(self) -> bool:
        """Nothing ran and trying again later may work (an idempotency key is released, an
        approval stands)."""
        return not self.executed and retry_later(self.status, self.code)

    @property
    def retry_after_s(self) -> float | None:
        """The wait as the body states it (seconds, three decimals, at most a day)."""
        return None if self.retry_after is None else round(min(self.retry_after, 86_400.0), 3)

    @classmethod
    def refused(cls, exc: ApiError) -> Outcome:
        return cls(status=exc.status or "", code=exc.code, message=exc.message,
                   reasons=exc.reasons, refusal=exc)

    @classmethod
    def held(cls, *, call_id: str, decision_id: str, approval_id: str, expires_at: str,
             reasons: list[str]) -> Outcome:
        return cls(status="AUTHORIZATION_REQUIRED", code="authorization_required",
                   message=HELD_MESSAGE, reasons=reasons, call_id=call_id,
                   decision_id=decision_id, approval_id=approval_id, expires_at=expires_at)

    @classmethod
    def from_recorded(cls, http_status: int, body: dict[str, Any], *,
                      replayed: bool = False) -> Outcome:
        """A kept response, read back into its fields (the native surface answers the body)."""
        error = body.get("error") or {}
        retry = error.get("retry_after_s")
        return cls(
            status=str(body.get("status") or ""), code=error.get("code"),
            message=str(error.get("message") or ""), call_id=body.get("call_id"),
            decision_id=body.get("decision_id"), result_id=body.get("result_id"),
            output=body.get("output"), executed="tokens_used" in body,
            tokens_used=body.get("tokens_used") or 0, cost=body.get("cost_1t") or 0.0,
            reasons=error.get("reasons"), tool_code=error.get("tool_code"),
            retry_after=float(retry) if isinstance(retry, (int, float)) else None,
            diagnostic=body.get("diagnostic"),
            refs={k: body[k] for k in REF_KEYS if body.get(k)},
            approval_id=body.get("approval_id"), expires_at=body.get("expires_at"),
            replayed=replayed, recorded=Recorded(http_status, body))


HttpStatusOf = Callable[[Outcome], int]
"""The HTTP status the native API answers an outcome with: the native surface supplies it
(proxy.web.native.http_status); the core only records it (call rows, usage, events)."""


def retry_later(status: str, code: str | None) -> bool:
    return status == "UNAVAILABLE" or (status == "DENIED" and code in LIMIT_CODES)


def error_object(o: Outcome) -> dict[str, Any]:
    error: dict[str, Any] = {"code": o.code, "message": o.message}
    if o.reasons is not None:
        error["reasons"] = o.reasons
    if o.tool_code is not None and o.tool_code != o.code:
        error["tool_code"] = o.tool_code
    if o.retry_after is not None:
        error["retry_after_s"] = o.retry_after_s
    return error


def response_body(o: Outcome) -> dict[str, Any]:
    """The outcome as the native API's JSON body: what the native route answers, what MCP and
    OpenAI quote, and what is kept (call row, idempotency key, approval) — one writer, so a
    replay answers what the call answered."""
    if o.recorded is not None:
        return o.recorded.body
    if o.refusal is not None:
        return o.refusal.body()
    if o.status == "AUTHORIZATION_REQUIRED":
        return {"ok": False, "status": o.status,
                "error": {"code": o.code, "message": o.message, "reasons": o.reasons},
                "approval_id": o.approval_id, "expires_at": o.expires_at,
                "call_id": o.call_id, "decision_id": o.decision_id}
    body: dict[str, Any]
    if o.status == "COMPLETED":
        body = {"ok": True, "status": "COMPLETED", "output": o.output,
                "tokens_used": o.tokens_used, "cost_1t": o.cost, "call_id": o.call_id,
                "result_id": o.result_id, "decision_id": o.decision_id}
    else:
        body = {"ok": False, "status": o.status, "error": error_object(o),
                "call_id": o.call_id, "decision_id": o.decision_id}
        if o.executed:
            if o.result_id is not None:
                body["result_id"] = o.result_id
            body["tokens_used"] = o.tokens_used
            body["cost_1t"] = o.cost
    if o.diagnostic is not None:
        body["diagnostic"] = o.diagnostic
    for key, values in o.refs.items():
        if values:
            body[key] = values
    return body
