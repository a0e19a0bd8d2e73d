"""What a model reads about an outcome, the same on every model-facing surface (MCP, OpenAI,
the model agent): a short paragraph saying what happened, whether anything ran, and what to do
next; and the one tool these surfaces add to the catalog, to resume a call held for approval."""

from __future__ import annotations

import math
from typing import Any

import orjson

from proxy.core.errors import InvalidArgs
from proxy.core.outcome import LIMIT_CODES, Outcome

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
        "args_json": {"type": "string", "maxLength": 262_144,
                      "description": "only for confidential calls, whose arguments were not "
                                     "kept: the same arguments again, as a JSON object in a string"},
    },
    "required": ["call_id"],
    "additionalProperties": False,
}


def resume_arguments(arguments: Any) -> tuple[str, dict[str, Any] | None] | None:
    """(call_id, args) from the resume tool's arguments, or None when they are malformed.
    Confidential arguments come as `args_json` (a string: the listed schema stays closed, as
    strict converters need) or, as before, `args` (an object)."""
    if not isinstance(arguments, dict) or set(arguments) - {"call_id", "args", "args_json"}:
        return None
    call_id, args, args_json = arguments.get("call_id"), arguments.get("args"), arguments.get("args_json")
    if not isinstance(call_id, str) or not 0 < len(call_id) <= 64:
        return None
    if args_json is not None:
        if args is not None or not isinstance(args_json, str) or len(args_json) > 262_144:
            return None
        try:
            args = orjson.loads(args_json)
        except orjson.JSONDecodeError:
            return None
    if args is not None and not isinstance(args, dict):
        return None
    return call_id, args


def resume_misuse() -> InvalidArgs:
    return InvalidArgs(f'{RESUME_TOOL} takes {{"call_id": "<call_id>", "args_json"?: "{{...}}"}}')


# What a model can do about each reason a policy gives ({tool}, {capability} filled in).
NEXT_STEPS: dict[str, str] = {
    "grant_required": ("To use {tool}, ask your team's governance for the capability "
                       "{capability} (a grant); until then, do without it."),
    "override_deny": "An override denies {tool} to you; only your team's governance can lift it.",
    "team_rule_deny": "Your team's rules deny {tool}; ask your team's governance if you need it.",
    "operator_only_tool": "This operation is reserved for operators: no agent can be granted it.",
    "greenfood_op_forbidden": "This operation is reserved for operators: no agent can be granted it.",
    "team_mismatch": "The context's team_id is not your token's team: leave it out or use your own.",
    "confidential_excludes_category_d": "A confidential call cannot use {tool}: call it without confidential.",
    "confidential_excludes_plugins": "A confidential call cannot use a plugin tool: call it without confidential.",
    "approval_denied": "Governance denied this call: do not repeat it as is.",
    "approval_expired": "Nobody decided before the approval expired: call {tool} again to ask anew.",
    "approval_args_mismatch": "The arguments differ from the approved ones: call {tool} again to ask anew.",
    "approval_invalid": "The approval no longer covers this call: call {tool} again to ask anew.",
    "invalid_input": "Fix the arguments and call again.",
    "unknown_named_query": "Use one of the named queries the tool's description lists.",
}
# Reasons that say why something was allowed or held: noise in a refusal's text.
_GRANTING = frozenset({"granted", "default_read", "category_a_default", "override_allow",
                       "standing_approval", "approval_required", "approved"})


def next_steps(o: Outcome, tool: str | None) -> str:
    """What to do about a denial, from its reasons (one sentence each, the tool named)."""
    name = tool or "this tool"
    capability = f"tool.{tool}.invoke" if tool else "the tool's capability (tool.<name>.invoke)"
    seen: list[str] = []
    for reason in o.reasons or []:
        step = NEXT_STEPS.get(str(reason))
        if step is not None:
            text = step.format(tool=name, capability=capability)
            if text not in seen:
                seen.append(text)
    return " ".join(seen)


def describe(o: Outcome, tool: str | None = None) -> str:
    """One clear paragraph: what happened, whether anything ran, what to do (`tool`: the
    catalog name of the tool called, to name what to ask for)."""
    status = o.status or "ERROR"
    code = o.code or "error"
    message = o.message
    reasons = [r for r in (o.reasons or []) if str(r) not in _GRANTING]
    call = f" (call_id {o.call_id})" if o.call_id else ""
    why = f" Reasons: {', '.join(map(str, reasons))}." if reasons else ""
    if status == "AUTHORIZATION_REQUIRED":
        return (f"Held for a governance approval: approval_id {o.approval_id}, call_id "
                f"{o.call_id}, expires {o.expires_at}. Nothing has run yet. Once "
                f"a governance admin approves it, call the tool {RESUME_TOOL} with "
                f'{{"call_id": "{o.call_id}"}} to run it (exactly once).')
    if code == "denied":
        step = next_steps(o, tool)
        if message.lower().startswith("policy denied"):  # says nothing the first words do not
            message = ""
        text = f"Denied by policy; nothing was executed{call}.{why} {message}".rstrip()
        if text and not text.endswith("."):
            text += "."
        return f"{text} {step}".rstrip()
    if code in LIMIT_CODES:
        retry = o.retry_after_s or _whole_seconds(o)
        after = f" Retry after {retry} s." if retry is not None else ""
        return f"Refused ({code}): {message}; nothing was executed{call}.{after}"
    if code == "tool_error":
        tool_code = o.tool_code if o.tool_code != o.code else None
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


def _whole_seconds(o: Outcome) -> str | None:
    """The wait in whole seconds, rounded up, as the native API's Retry-After header says it
    (what a model was told when the body's figure was zero)."""
    if o.refusal is not None:
        return o.refusal.headers.get("Retry-After")
    if o.retry_after is None or o.recorded is not None:
        return None
    return str(max(1, math.ceil(min(o.retry_after, 86_400.0))))
