"""Catalog entries as MCP tools, and pipeline outcomes as MCP tool results.

Every outcome of a call that reached the pipeline — denial, rate limit, approval needed,
tool error, timeout, invalid arguments — is a tool result with `isError: true` and a text
that says what happened and what to do, so a model can read it and react. Its
`structuredContent` is the native API's body (status, error code, call_id, approval_id...).
Only failures to find the tool or to read the request are JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.mcp.notices import RESUME_DESCRIPTION, RESUME_SCHEMA, RESUME_TOOL, describe
from proxy.mcp.protocol import INVALID_PARAMS, McpError
from proxy.pipeline import Outcome
from services.sdk.manifest import ToolManifest

RESUME_TOOL_DEF: dict[str, Any] = {
    "name": RESUME_TOOL,
    "title": "Resume an approved call",
    "description": RESUME_DESCRIPTION,
    "inputSchema": RESUME_SCHEMA,
    "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}


def mcp_tool(m: ToolManifest) -> dict[str, Any]:
    annotations: dict[str, Any] = {"openWorldHint": m.network}
    if m.action == "read":
        annotations["readOnlyHint"] = True
    else:
        annotations.update(readOnlyHint=False, destructiveHint=True)
    return {
        "name": m.tool_id,
        "description": m.description,
        "inputSchema": m.input_schema,
        "outputSchema": m.output_schema,
        "annotations": annotations,
        "_meta": {
            "toolproxy/category": m.category,
            "toolproxy/action": m.action,
            "toolproxy/requires_approval": m.requires_approval,
        },
    }


def tool_list(manifests: list[ToolManifest]) -> list[dict[str, Any]]:
    tools = [mcp_tool(m) for m in manifests]
    if any(m.requires_approval for m in manifests):
        tools.append(RESUME_TOOL_DEF)
    return tools


def call_result(outcome: Outcome, tool: str, *, protocol_errors: bool = True) -> dict[str, Any]:
    """`protocol_errors`: an unknown tool or an unreadable request is a JSON-RPC error (tools/call);
    the resume tool reports everything as a result instead."""
    body = outcome.body
    if body.get("ok") is True:
        output = body.get("output")
        structured = output if isinstance(output, dict) else {"value": output}
        return {"content": [{"type": "text", "text": orjson.dumps(output).decode()}],
                "structuredContent": structured, "isError": False,
                "_meta": _ids(body), "resultType": "complete"}
    code = (body.get("error") or {}).get("code")
    if protocol_errors and code == "unknown_tool":
        raise McpError(INVALID_PARAMS, f"Unknown tool: {tool}", {"code": code})
    if protocol_errors and code == "invalid_request":
        raise McpError(INVALID_PARAMS, str(body["error"].get("message", "invalid request")), {"code": code})
    text = describe(body, outcome.headers.get("Retry-After"))
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": body, "isError": True,
            "_meta": _ids(body), "resultType": "complete"}


def _ids(body: dict[str, Any]) -> dict[str, Any]:
    return {f"toolproxy/{k}": body[k] for k in ("call_id", "decision_id", "result_id", "status")
            if body.get(k)}
