"""The console's typed errors: a refused Origin, a missing or wrong CSRF token, the rate guard."""

from __future__ import annotations

from proxy.errors import ApiError, Forbidden


class OriginRefused(Forbidden):
    code = "origin_not_allowed"


class CsrfFailed(Forbidden):
    code = "csrf_failed"


class ConsoleRateLimited(ApiError):
    code = "rate_limited"
    http_status = 429
