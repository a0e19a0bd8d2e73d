"""How the native API answers a core outcome: its HTTP status (the one table from status and
code to HTTP, DESIGN.md "The native API"), its JSON body and its headers. The native routes
answer with it, the OpenAI surface's `results` quote it, and the app hands `http_status` to the
core, whose records keep what the native API answers."""

from __future__ import annotations

import math

from aiohttp import web

from proxy.core.outcome import LIMIT_CODES, Outcome, response_body
from proxy.web.responses import json_response

# A tool's own error codes HTTP has a word for, so a client can branch on the status alone:
# bad input the tool found (4xx, as for input the proxy refuses itself), a missing record
# (404, also for another team's), a stale version or a taken name (409). The body is the same
# as for any tool error (FAILED, error.code tool_error, the tool's code in error.tool_code);
# every other tool error answers 200.
TOOL_ERROR_HTTP = {
    "invalid_args": 400, "invalid": 400, "invalid_path": 400, "invalid_content": 400,
    "invalid_input": 400, "invalid_invocation": 400, "invocation_required": 400,  # agent.invoke: the callee's schema, a chain
    "not_found": 404,
    "version_conflict": 409, "conflict": 409,
    "file_too_large": 413, "document_too_large": 413,
}
TIMEOUT_CODES = ("timeout", "plugin_timeout", "upstream_timeout")


def tool_error_status(tool_code: str) -> int:
    return TOOL_ERROR_HTTP.get(tool_code, 200)


def http_status(o: Outcome) -> int:
    if o.recorded is not None:  # answered as it was then
        return o.recorded.http_status
    if o.refusal is not None:  # refused before a call existed: the error's own status
        return o.refusal.http_status
    if o.disconnected:
        return 499  # nobody received it (the records say so)
    status = o.status
    if status == "AUTHORIZATION_REQUIRED":
        return 202
    if status == "DENIED":
        return 429 if o.code in LIMIT_CODES else 403
    if status == "UNAVAILABLE":
        return 503
    if status == "FAILED":
        if o.code in TIMEOUT_CODES:
            return 504
        if o.code == "proxy_lost":
            return 502  # the replica running it stopped; the tool may have run
        if o.code == "payload_too_large":
            return 413  # larger than the bus carries: nothing was sent
        if o.code == "tool_error" and o.executed and o.tool_code is not None:
            return tool_error_status(o.tool_code)  # the tool ran and said why
    return 200  # COMPLETED, CANCELLED, and every other ending of a call that ran


def headers(o: Outcome) -> dict[str, str]:
    if o.recorded is not None:
        return {"Idempotent-Replayed": "true"} if o.replayed else {}
    if o.refusal is not None:
        return dict(o.refusal.headers)
    if o.retry_after is not None:
        # Whole seconds, rounded up: a client waiting this long is admitted.
        return {"Retry-After": str(max(1, math.ceil(min(o.retry_after, 86_400.0))))}
    return {}


def respond(o: Outcome) -> web.Response:
    return json_response(http_status(o), response_body(o), headers(o))
