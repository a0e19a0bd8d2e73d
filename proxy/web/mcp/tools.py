"""Catalog entries as MCP tools, and the core's outcomes as MCP tool results.

Every outcome of a call that reached the pipeline — denial, rate limit, approval needed,
tool error, timeout, invalid arguments — is a tool result with `isError: true` and a text
that says what happened and what to do, so a model can read it and react. The native API's
body (status, error code, call_id, approval_id...) is in `_meta["toolproxy/error"]`; it is
also the `structuredContent` only where it is valid against the tool's `outputSchema`, since
clients (the TypeScript SDK, the Inspector) validate structuredContent even on errors.
Only failures to find the tool or to read the request are JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import Draft202012Validator

from proxy.core.notices import RESUME_DESCRIPTION, RESUME_SCHEMA, RESUME_TOOL, describe
from proxy.core.outcome import Outcome, response_body
from proxy.core.tool_names import to_openai
from proxy.web.mcp.protocol import INVALID_PARAMS, McpError
from wire.categories import CATEGORIES
from wire.manifest import ToolManifest
from wire.portable_schema import published

ERROR_META = "toolproxy/error"
TOOL_ID_META = "toolproxy/tool_id"  # the catalog name of a listed tool

RESUME_TOOL_DEF: dict[str, Any] = {
    "name": RESUME_TOOL,
    "title": "Resume an approved call",
    "description": RESUME_DESCRIPTION,
    "inputSchema": RESUME_SCHEMA,
    # It runs whichever call was held: a write, possibly reaching past the proxy; asking
    # again answers the same result (exactly once).
    "annotations": {"title": "Resume an approved call", "readOnlyHint": False,
                    "destructiveHint": True, "idempotentHint": True, "openWorldHint": True},
}


def title_of(m: ToolManifest) -> str:
    """The catalog name, then what kind of tool it is: `task.list (controlled read)`,
    `greenfood.order (critical write, approval per call)`."""
    kind = f"{CATEGORIES[m.category].label} {m.action}"
    if m.requires_approval:
        kind += ", approval per call"
    return f"{m.tool_id} ({kind})"


def annotations_of(m: ToolManifest) -> dict[str, Any]:
    """All four hints, from the action and the category: a read changes nothing (read-only,
    idempotent, not destructive); a write may change or remove what exists and is not safe to
    repeat; a networked or critical (D) tool reaches past the proxy's own stores."""
    read = m.action == "read"
    return {"title": title_of(m), "readOnlyHint": read, "destructiveHint": not read,
            "idempotentHint": read, "openWorldHint": m.network or m.category == "D"}


def mcp_tool(m: ToolManifest) -> dict[str, Any]:
    """Listed under the name every model API accepts (`task-list`: the same reversible
    spelling as the OpenAI surface); the catalog name is in the title and in `_meta`, and a
    call may use either."""
    return {
        "name": to_openai(m.tool_id),
        "title": title_of(m),
        "description": m.description,
        "inputSchema": published(m.input_schema),
        "outputSchema": published(m.output_schema),
        "annotations": annotations_of(m),
        "_meta": {
            TOOL_ID_META: m.tool_id,
            "toolproxy/category": m.category,
            "toolproxy/action": m.action,
            "toolproxy/requires_approval": m.requires_approval,
        },
    }


def tool_list(manifests: list[ToolManifest], *, tasks: bool = False,
              resume: bool = True) -> list[dict[str, Any]]:
    """`tasks`: tools held for every call may be called as tasks (2025-11-25's
    `execution.taskSupport`); `resume`: the client may not take tasks, so the resume tool is
    offered beside tools that need approval."""
    tools = [mcp_tool(m) for m in manifests]
    if tasks:
        for tool, m in zip(tools, manifests, strict=True):
            if m.requires_approval:
                tool["execution"] = {"taskSupport": "optional"}
    if resume and any(m.requires_approval for m in manifests):
        tools.append(RESUME_TOOL_DEF)
    return tools


_output_validators: dict[str, tuple[ToolManifest, Draft202012Validator]] = {}


def fits_output_schema(manifest: ToolManifest | None, value: Any) -> bool:
    """Whether `value` is valid against the tool's listed outputSchema (no tool: no schema)."""
    if manifest is None:
        return False
    cached = _output_validators.get(manifest.tool_id)
    if cached is None or cached[0] is not manifest:  # a catalog change replaces the manifest
        cached = _output_validators[manifest.tool_id] = (
            manifest, Draft202012Validator(manifest.output_schema))
    return bool(cached[1].is_valid(value))


def call_result(outcome: Outcome, tool: str, *, protocol_errors: bool = True,
                manifest: ToolManifest | None = None) -> dict[str, Any]:
    """`protocol_errors`: an unknown tool or an unreadable request is a JSON-RPC error (tools/call);
    the resume tool reports everything as a result instead. `manifest`: the listed tool, whose
    outputSchema an error's structuredContent must satisfy (else it carries none)."""
    if outcome.ok:
        output = outcome.output
        structured = output if isinstance(output, dict) else {"value": output}
        return {"content": [{"type": "text", "text": orjson.dumps(output).decode()}],
                "structuredContent": structured, "isError": False,
                "_meta": _ids(outcome), "resultType": "complete"}
    code = outcome.code
    if protocol_errors and code == "unknown_tool":
        raise McpError(INVALID_PARAMS, f"Unknown tool: {tool}", {"code": code})
    if protocol_errors and code == "invalid_request":
        raise McpError(INVALID_PARAMS, outcome.message, {"code": code})
    body = response_body(outcome)  # the native body, quoted whole
    text = describe(outcome, manifest.tool_id if manifest is not None else None)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}],
                              "isError": True, "_meta": {**_ids(outcome), ERROR_META: body},
                              "resultType": "complete"}
    if fits_output_schema(manifest, body):
        result["structuredContent"] = body
    return result


def _ids(o: Outcome) -> dict[str, Any]:
    ids = {"call_id": o.call_id, "decision_id": o.decision_id, "result_id": o.result_id,
           "status": o.status}
    return {f"toolproxy/{k}": v for k, v in ids.items() if v}
