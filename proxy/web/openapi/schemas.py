"""Response schemas of the OpenAPI document: what each route answers, as JSON Schema.

They state the keys a client can rely on (required) and their types; objects stay open to
added keys, so a new field is not a breaking change. tests/test_schemathesis.py checks every
response the server gives against them.
"""

from __future__ import annotations

from typing import Any

from wire.ids import ID_PATTERN

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], properties: dict[str, Schema]) -> Schema:
    return {"type": "object", "required": required, "properties": properties}


def array_of(item: Schema) -> Schema:
    return {"type": "array", "items": item}


STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}
ANY: Schema = {}
TIME: Schema = {"type": "string", "format": "date-time"}
OPT_STR: Schema = {"type": ["string", "null"]}
OPT_TIME: Schema = {"type": ["string", "null"], "format": "date-time"}
OPT_INT: Schema = {"type": ["integer", "null"]}
OPT_NUM: Schema = {"type": ["number", "null"]}
ID: Schema = {"type": "string", "pattern": ID_PATTERN}

ERROR_DETAIL = obj(["code", "message"], {
    "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "description": "stable, snake_case"},
    "message": STR,
    "reasons": array_of(STR),
    "tool_code": STR,
    "retry_after_s": NUM,
})

ERROR = obj(["ok", "error"], {
    "ok": {"const": False},
    "status": {"type": "string", "description": "the call status, where one applies (DENIED, UNAVAILABLE...)"},
    "error": ref("ErrorDetail"),
    "call_id": STR,
    "decision_id": STR,
})

REFS: dict[str, Schema] = {k: array_of(ANY) for k in
                           ("object_refs", "artifacts", "observations", "provenance_refs")}

CALL_RESULT = obj(["ok", "status", "call_id", "decision_id"], {
    "ok": BOOL,
    "status": {"enum": ["COMPLETED", "FAILED", "CANCELLED"]},
    "output": ANY,
    "tokens_used": INT,
    "cost_1t": NUM,
    "call_id": STR,
    "result_id": STR,
    "decision_id": STR,
    "error": ref("ErrorDetail"),
    "diagnostic": STR,
    **REFS,
})

AUTHORIZATION_REQUIRED = obj(["ok", "status", "error", "approval_id", "expires_at", "call_id"], {
    "ok": {"const": False},
    "status": {"const": "AUTHORIZATION_REQUIRED"},
    "error": ref("ErrorDetail"),
    "approval_id": STR,
    "expires_at": TIME,
    "call_id": STR,
    "decision_id": STR,
})

CATALOG_ENTRY = obj(
    ["tool_id", "version", "capability", "category", "action", "risk", "cost", "network",
     "requires_approval", "description", "input_schema", "output_schema", "timeout_ms", "available"],
    {"tool_id": STR, "version": STR, "capability": STR, "category": {"enum": ["A", "B", "C", "D"]},
     "action": {"enum": ["read", "write"]}, "risk": STR, "cost": {"type": "object"},
     "network": BOOL, "requires_approval": BOOL, "description": STR,
     "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
     "timeout_ms": INT, "available": BOOL,
     # Metered tools only: how a call's tokens are estimated, to reserve them before it runs.
     "token_estimate": {"type": "object"}},
)

CALL = obj(["call_id", "status", "tool", "team_id", "agent_id", "created_at"], {
    "call_id": STR, "status": STR, "tool": STR, "team_id": STR, "agent_id": STR,
    "agent_run_id": OPT_STR, "decision_id": OPT_STR, "result_id": OPT_STR,
    "http_status": OPT_INT, "created_at": OPT_TIME, "started_at": OPT_TIME,
    "finished_at": OPT_TIME, "latency_ms": OPT_NUM, "output": ANY, "error": ANY,
    "tokens_used": NUM, "cost_1t": NUM, "diagnostic": OPT_STR, "approval_id": OPT_STR, **REFS,
})

RESULT = obj(["result_id", "call_id", "tool", "status"], {
    "result_id": STR, "call_id": STR, "tool": STR, "status": STR, "output": ANY, "error": ANY,
    "tokens_used": NUM, "cost_1t": NUM, "finished_at": OPT_TIME, **REFS,
})

RUN = obj(["run_id", "team_id", "agent_id", "status", "budget", "used"], {
    "run_id": STR, "team_id": STR, "agent_id": STR, "status": STR,
    "budget": obj(["max_calls", "max_tokens", "max_cost_1t"],
                  {"max_calls": OPT_INT, "max_tokens": OPT_INT, "max_cost_1t": OPT_NUM}),
    "used": obj(["calls", "tokens", "cost_1t"], {"calls": INT, "tokens": INT, "cost_1t": NUM}),
    "plan": ANY, "outcome": OPT_STR, "created_at": OPT_TIME, "completed_at": OPT_TIME,
})

RUN_DETAIL = obj(["run_id", "status", "calls", "totals"], {
    "run_id": STR, "status": STR, "calls": array_of({"type": "object"}),
    "totals": obj(["calls", "completed", "tokens_used", "cost_1t"],
                  {"calls": INT, "completed": INT, "tokens_used": INT, "cost_1t": NUM}),
})

EVENT = obj(["sequence", "type", "time"], {
    "sequence": INT, "event_id": STR, "type": STR, "time": TIME, "run_id": OPT_STR,
    "call_id": OPT_STR, "turn_id": OPT_STR, "refs": ANY, "payload": ANY,
})

TURN_STATUS: Schema = {"enum": ["RUNNING", "AUTHORIZATION_REQUIRED", "COMPLETED", "FAILED", "CANCELLED"]}

TURN = obj(["turn_id", "run_id", "agent", "status", "calls_made", "tokens_used"], {
    "turn_id": STR, "run_id": STR, "agent": {"enum": ["demo", "model"]}, "status": TURN_STATUS,
    "calls_made": INT, "tokens_used": INT,
    "authorization": array_of(obj(["call_id", "approval_id"], {
        "call_id": STR, "approval_id": STR, "expires_at": OPT_TIME, "tool": STR,
        "tool_call_id": STR})),
    "result": {"type": "object"}, "error": ref("ErrorDetail"), "cancel_requested": BOOL,
})

TURN_STEP = obj(["seq", "kind", "time", "call_id"], {
    "seq": INT, "time": TIME, "call_id": OPT_STR,
    "kind": {"enum": ["user", "agent", "plan", "tool_request", "tool_result",
                      "authorization_required", "result", "error"]},
})

TURN_DETAIL = obj(["turn_id", "run_id", "agent", "status", "steps", "created_at"], {
    **TURN["properties"], "agent_id": STR, "input": STR, "max_calls": INT,
    "steps": array_of(ref("TurnStep")), "created_at": TIME, "updated_at": OPT_TIME,
    "finished_at": OPT_TIME,
})

APPROVAL = obj(["approval_id", "call_id", "team_id", "agent_id", "tool", "state", "expires_at"], {
    "approval_id": STR, "call_id": STR, "team_id": STR, "agent_id": STR, "tool": STR,
    "args_hash": STR, "state": STR, "reasons": array_of(STR), "policy_revision": STR,
    "requested_at": TIME, "expires_at": TIME, "decided_by": OPT_STR, "decided_at": OPT_TIME,
    "decision_reason": OPT_STR,
    # What the call's service prepared (a transaction) and its hash, the approval's binding.
    "preview": {"type": ["object", "null"]}, "binding": OPT_STR,
})

STANDING_APPROVAL = obj(
    ["standing_approval_id", "team_id", "agent_id", "tool", "expires_at", "max_calls", "used_calls",
     "remaining_calls", "state"], {
        "standing_approval_id": STR, "team_id": STR, "agent_id": OPT_STR, "tool": STR,
        "args": {"type": ["object", "null"]}, "args_schema": {"type": ["object", "null"]},
        "expires_at": TIME, "max_calls": INT, "used_calls": INT, "remaining_calls": INT,
        "state": {"enum": ["active", "expired", "exhausted", "revoked"]}, "reason": STR,
        "created_by": STR, "created_at": TIME, "revoked_at": OPT_TIME, "revoked_by": OPT_STR,
    })

GRANT = obj(["grant_id", "team_id", "agent_id", "capability"], {
    "grant_id": STR, "team_id": STR, "agent_id": OPT_STR, "capability": STR,
    "created_by": STR, "created_at": TIME, "expires_at": OPT_TIME,
})

OVERRIDE = obj(["override_id", "team_id", "agent_id", "tool", "effect"], {
    "override_id": STR, "team_id": STR, "agent_id": STR, "tool": STR,
    "effect": {"enum": ["allow", "deny"]}, "timeout_ms": OPT_INT, "rate_per_minute": OPT_INT,
    "reason": STR, "created_by": STR, "created_at": TIME, "expires_at": OPT_TIME,
})

TEAM_RULE = obj(["team_id", "tool", "deny", "require_approval", "timeout_ms", "rate_per_minute"], {
    "team_id": STR, "tool": STR, "deny": BOOL, "require_approval": BOOL,
    "timeout_ms": OPT_INT, "rate_per_minute": OPT_INT, "reason": STR, "created_by": STR,
    "created_at": TIME, "expires_at": OPT_TIME,
})

QUOTA = obj(["team_id", "agent_id", "invocations", "tokens", "compute_units", "cost_1t"], {
    "team_id": STR, "agent_id": OPT_STR, "invocations": OPT_INT, "tokens": OPT_INT,
    "compute_units": OPT_NUM, "cost_1t": OPT_NUM, "updated_by": STR, "updated_at": OPT_TIME,
    "used_today": {"type": "object"}, "remaining_today": {"type": "object"},
})

DECISION = obj(["decision_id", "time", "team_id", "agent_id", "tool", "phase", "result"], {
    "decision_id": STR, "time": TIME, "policy_revision": STR, "engine": STR, "team_id": STR,
    "agent_id": STR, "tool": STR, "phase": {"enum": ["list", "call"]},
    "result": {"enum": ["allow", "deny", "approval_required", "error"]},
    "reasons": array_of(STR), "call_id": OPT_STR,
    "input": {"type": ["object", "null"], "description": "the policy input (redacted)"},
    "output": {"type": ["object", "null"],
               "description": "the policy's whole answer (allow, require_approval, reasons, obligations, error_code)"},
})

# The console (proxy/console).
CONSOLE_SESSION = obj(["identity", "csrf_token", "expires_at"], {
    "identity": obj(["agent_id", "team_id", "role"], {
        "agent_id": STR, "team_id": STR, "role": {"enum": ["governance", "admin"]}}),
    "csrf_token": {"type": "string", "description": "send it as X-CSRF-Token on every console request"},
    "expires_at": TIME,
    "features": array_of({"enum": ["standing_approvals"]}),
})
INBOX_ITEM = obj(["approval_id", "call_id", "team_id", "agent_id", "tool", "reasons", "expires_at",
                  "confidential", "args_hash", "args_size", "args"], {
    "approval_id": STR, "call_id": STR, "team_id": STR, "agent_id": STR, "agent_run_id": OPT_STR,
    "turn_id": OPT_STR, "tool": STR, "category": OPT_STR, "action": OPT_STR,
    "reasons": array_of(STR), "policy_revision": STR, "requested_at": TIME, "expires_at": TIME,
    "confidential": BOOL, "args_hash": STR, "args_size": INT,
    "args": {"type": ["object", "null"], "description": "null for a confidential call (hash and size only) or one too large to show"},
    "args_omitted": {"enum": ["confidential", "too_large", None]},
    "preview": {"description": "what will run, as its service prepared it (where it does)"},
})

# JSON-RPC 2.0 on /mcp: one response, or a batch of them (2025-03-26 only).
JSONRPC_ERROR = obj(["jsonrpc", "id", "error"], {
    "jsonrpc": {"const": "2.0"},
    "id": {"type": ["string", "integer", "null"]},
    "error": obj(["code", "message"], {"code": INT, "message": STR, "data": ANY}),
})
JSONRPC_RESULT = obj(["jsonrpc", "id", "result"], {
    "jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer"]}, "result": {"type": "object"},
})
JSONRPC_RESPONSE: Schema = {"oneOf": [ref("JsonRpcResult"), ref("JsonRpcError")]}
JSONRPC_MESSAGE = obj(["jsonrpc"], {
    "jsonrpc": {"const": "2.0"},
    "id": {"type": ["string", "integer"], "maxLength": 256},
    "method": {"type": "string", "minLength": 1, "maxLength": 128},
    "params": {"type": "object"},
})

SCHEMAS: dict[str, Schema] = {
    "Error": ERROR, "ErrorDetail": ERROR_DETAIL, "CallResult": CALL_RESULT,
    "AuthorizationRequired": AUTHORIZATION_REQUIRED, "CatalogEntry": CATALOG_ENTRY,
    "Call": CALL, "Result": RESULT, "Run": RUN, "RunDetail": RUN_DETAIL, "Event": EVENT, "Approval": APPROVAL,
    "Turn": TURN, "TurnDetail": TURN_DETAIL, "TurnStep": TURN_STEP, "StandingApproval": STANDING_APPROVAL,
    "Grant": GRANT, "Override": OVERRIDE, "TeamRule": TEAM_RULE, "Quota": QUOTA,
    "Decision": DECISION, "ConsoleSession": CONSOLE_SESSION, "InboxItem": INBOX_ITEM,
    "JsonRpcError": JSONRPC_ERROR, "JsonRpcResult": JSONRPC_RESULT,
    "JsonRpcResponse": JSONRPC_RESPONSE, "JsonRpcMessage": JSONRPC_MESSAGE,
}


def wrap(key: str, item: Schema) -> Schema:
    """`{"<key>": item}`: the single-object bodies of the governance routes."""
    return obj([key], {key: item})


def listing(key: str, item: Schema) -> Schema:
    return obj([key], {key: array_of(item)})
