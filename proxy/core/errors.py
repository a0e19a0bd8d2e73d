"""The core's typed errors: a call refused before it exists (its name, its arguments, its
team), the PDP or a tool out of reach, and the idempotency and resume conflicts. Each carries
its stable code and the status the error middleware renders (proxy.errors.ApiError)."""

from __future__ import annotations

from proxy.errors import ApiError, Conflict, PayloadTooLarge


class InvalidArgs(ApiError, ValueError):
    code = "invalid_args"
    http_status = 400


class Denied(ApiError, PermissionError):
    code = "denied"
    http_status = 403
    status = "DENIED"


class ToolUnavailable(ApiError):
    code = "tool_unavailable"
    http_status = 503
    status = "UNAVAILABLE"


class PdpUnavailable(ApiError):
    code = "pdp_unavailable"
    http_status = 503
    status = "UNAVAILABLE"


class PolicyUndefined(PdpUnavailable):
    code = "policy_undefined"


class CallTooLargeForBus(PayloadTooLarge):
    """The call, with its envelope, is larger than the bus carries (NATS max_payload): 413
    payload_too_large, nothing sent (wire.bounds.NATS_MAX_PAYLOAD is what deployments set)."""

    status = "FAILED"


class ToolTimeout(ApiError, TimeoutError):
    code = "timeout"
    http_status = 504
    status = "FAILED"


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"


class IdempotencyInProgress(Conflict):
    code = "idempotency_in_progress"


class IdempotencyUnavailable(ApiError):
    """The idempotency store did not answer, or a request lost its claim: nothing was run."""

    code = "idempotency_unavailable"
    http_status = 503
    status = "UNAVAILABLE"


class CallInProgress(Conflict):
    code = "call_in_progress"
