"""Typed API errors: each carries a stable snake_case code and the HTTP status it renders as."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Base of every error the API renders; the code is also the metrics `reason` label."""

    code: str = "internal_error"
    http_status: int = 500
    status: str | None = None  # the call status (DENIED, UNAVAILABLE, FAILED...) where one applies

    def __init__(
        self,
        message: str,
        *,
        reasons: list[str] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reasons = reasons
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.reasons is not None:
            error["reasons"] = self.reasons
        out: dict[str, Any] = {"ok": False}
        if self.status is not None:
            out["status"] = self.status
        out["error"] = error
        out.update(self.extra)
        return out


class InvalidRequest(ApiError, ValueError):
    code = "invalid_request"
    http_status = 400



class Unauthenticated(ApiError, PermissionError):
    code = "unauthenticated"
    http_status = 401


class Forbidden(ApiError, PermissionError):
    """Authenticated but not allowed to use this route (e.g. an agent on an admin route)."""

    code = "forbidden"
    http_status = 403



class NotFound(ApiError, LookupError):
    code = "not_found"
    http_status = 404


class UnknownTool(NotFound):
    code = "unknown_tool"


class MethodNotAllowed(ApiError):
    code = "method_not_allowed"
    http_status = 405


class Conflict(ApiError):
    code = "conflict"
    http_status = 409


class MisdirectedRequest(ApiError):
    """The request names a Host this server does not serve (TOOLPROXY_ALLOWED_HOSTS)."""

    code = "misdirected_request"
    http_status = 421


class PayloadTooLarge(ApiError, ValueError):
    code = "payload_too_large"
    http_status = 413


class UnsupportedMediaType(ApiError, ValueError):
    code = "unsupported_media_type"
    http_status = 415





class TooManyStreams(ApiError):
    """The replica holds as many open streams as it may (the native events, the console's
    inbox): poll instead, or retry."""

    code = "too_many_streams"
    http_status = 503


class DependencyUnavailable(ApiError):
    code = "dependency_unavailable"
    http_status = 503
    status = "UNAVAILABLE"
