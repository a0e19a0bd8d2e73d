"""What a model reads about an outcome, the same on every model-facing surface (MCP, OpenAI):
a short paragraph saying what happened, whether anything ran, and what to do next; and the
one tool these surfaces add to the catalog, to resume a call held for approval."""

from __future__ import annotations

from typing import Any

# Not a catalog name (those start with a lowercase letter) nor the OpenAI spelling of one,
# so it can never shadow a tool.
RESUME_TOOL = "_toolproxy_resume"
RESUME_DESCRIPTION = (
    "Runs a call that was held for a governance approval, once it is approved (exactly once: "
    "asking again returns the same result). Pass the call_id from the approval notice."
)
RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call_id": {"type": "string", "minLength": 1, "maxLength": 64,
                    "description": "the call_id of the held call"},
        "args": {"type": "object",
                 "description": "only for confidential calls: their arguments were not kept"},
    },
    "required": ["call_id"],
    "additionalProperties": False,
}


def resume_arguments(arguments: Any) -> tuple[str, dict[str, Any] | None] | None:
    """(call_id, args) from the resume tool's arguments, or None when they are malformed."""
    if not isinstance(arguments, dict) or set(arguments) - {"call_id", "args"}:
        return None
    call_id, args = arguments.get("call_id"), arguments.get("args")
    if not isinstance(call_id, str) or not 0 < len(call_id) <= 64:
        return None
    if args is not None and not isinstance(args, dict):
        return None
    return call_id, args


def resume_misuse() -> dict[str, Any]:
    return {"ok": False, "error": {"code": "invalid_args", "message":
            f'{RESUME_TOOL} takes {{"call_id": "<call_id>", "args"?: {{...}}}}'}}


def describe(body: dict[str, Any], retry_after: str | None = None) -> str:
    """One clear paragraph: what happened, whether anything ran, what to do."""
    status = str(body.get("status") or "ERROR")
    error = body.get("error") or {}
    code = str(error.get("code", "error"))
    message = str(error.get("message", ""))
    reasons = error.get("reasons")
    call = f" (call_id {body['call_id']})" if body.get("call_id") else ""
    why = f" Reasons: {', '.join(map(str, reasons))}." if reasons else ""
    if status == "AUTHORIZATION_REQUIRED":
        return (f"Held for a governance approval: approval_id {body.get('approval_id')}, call_id "
                f"{body.get('call_id')}, expires {body.get('expires_at')}. Nothing has run yet. Once "
                f"a governance admin approves it, call the tool {RESUME_TOOL} with "
                f'{{"call_id": "{body.get("call_id")}"}} to run it (exactly once).{why}')
    if code == "denied":
        return f"Denied by policy; nothing was executed{call}.{why} {message}".rstrip()
    if code in ("rate_limited", "quota_exceeded"):
        retry = error.get("retry_after_s") or retry_after
        after = f" Retry after {retry} s." if retry is not None else ""
        return f"Refused ({code}): {message}; nothing was executed{call}.{after}"
    if code == "tool_error":
        tool_code = error.get("tool_code")
        label = f" ({tool_code})" if tool_code else ""
        return f"The tool reported an error{label}: {message}{call}"
    if code == "invalid_args":
        return f"Invalid arguments: {message}. Fix them and call again."
    if code == "unknown_tool":
        return f"{message}. Use one of the listed tools."
    if code == "timeout":
        return f"The tool did not answer within its deadline{call}: {message}"
    if status == "UNAVAILABLE":
        return f"Unavailable ({code}): {message}; nothing was executed{call}. Try again later."
    return f"{status} ({code}): {message}{call}{why}"
