"""Catalog entries as MCP tools, and pipeline outcomes as MCP tool results.

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

from proxy.mcp.notices import RESUME_DESCRIPTION, RESUME_SCHEMA, RESUME_TOOL, describe
from proxy.mcp.protocol import INVALID_PARAMS, McpError
from proxy.pipeline import Outcome
from services.sdk.manifest import ToolManifest

ERROR_META = "toolproxy/error"

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
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True,
                              "_meta": {**_ids(body), ERROR_META: body}, "resultType": "complete"}
    if fits_output_schema(manifest, body):
        result["structuredContent"] = body
    return result


def _ids(body: dict[str, Any]) -> dict[str, Any]:
    return {f"toolproxy/{k}": body[k] for k in ("call_id", "decision_id", "result_id", "status")
            if body.get(k)}
