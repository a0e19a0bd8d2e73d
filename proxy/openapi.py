"""The OpenAPI 3.1 document of the HTTP API, built from the same pydantic models the routes
validate with (GET /openapi.json)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from proxy.agents.routes import AgentKey, AgentRegistration
from proxy.envelope import InvokeRequest
from proxy.plugins.routes import PluginInstall, PluginName, PluginVersion
from proxy.routes.admin_governance import OverrideKey, OverrideRequest, PolicyPush
from proxy.routes.admin_grants import GrantRequest
from proxy.routes.admin_quotas import QuotaBody, QuotaKey
from proxy.routes.approvals import DecisionBody, ResumeBody
from proxy.routes.openai_tools import ToolCallsBody
from proxy.routes.runs import Complete, Plan, StartRun

# (method, path, tag, summary, request body model, public)
OPERATIONS: list[tuple[str, str, str, str, type[BaseModel] | None, bool]] = [
    ("post", "/v1/tools/invoke", "tools", "Invoke a tool through the whole pipeline", InvokeRequest, False),
    ("get", "/v1/tools", "tools", "The catalog, filtered to what the caller may call", None, False),
    ("get", "/v1/calls/{call_id}", "calls", "A call: status, timing, output, references", None, False),
    ("get", "/v1/results/{result_id}", "calls", "A call's result by its result_id", None, False),
    ("post", "/v1/calls/{call_id}/resume", "calls", "Run an approved call (exactly once)", ResumeBody, False),
    ("post", "/v1/calls/{call_id}/cancel", "calls", "Cancel a running or held call", None, False),
    ("get", "/v1/artifacts/{artifact_id}", "calls", "An output kept whole as an artifact", None, False),
    ("post", "/v1/runs", "runs", "Start a run (turn), optionally with a budget", StartRun, False),
    ("post", "/v1/runs/{run_id}/plan", "runs", "Publish the run's plan", Plan, False),
    ("post", "/v1/runs/{run_id}/complete", "runs", "Complete the run", Complete, False),
    ("get", "/v1/runs/{run_id}", "runs", "A run with its calls and totals", None, False),
    ("get", "/v1/events", "events", "Events after a cursor (per-team sequence)", None, False),
    ("get", "/v1/events/stream", "events", "Events as server-sent events (Last-Event-ID)", None, False),
    ("get", "/v1/approvals", "governance", "Calls awaiting (or past) approval", None, False),
    ("post", "/v1/approvals/{approval_id}/decision", "governance", "Approve or deny a held call", DecisionBody, False),
    ("get", "/v1/usage", "usage", "Usage totals for a day or a range", None, False),
    ("post", "/v1/admin/grants", "admin", "Grant a capability", GrantRequest, False),
    ("get", "/v1/admin/grants", "admin", "List grants", None, False),
    ("post", "/v1/admin/grants/revoke", "admin", "Revoke a grant", GrantRequest, False),
    ("post", "/v1/admin/overrides", "admin", "Allow or deny one tool for one agent", OverrideRequest, False),
    ("get", "/v1/admin/overrides", "admin", "List overrides", None, False),
    ("post", "/v1/admin/overrides/delete", "admin", "Delete an override", OverrideKey, False),
    ("post", "/v1/admin/quotas", "admin", "Set a daily quota", QuotaBody, False),
    ("get", "/v1/admin/quotas", "admin", "Quotas with today's use", None, False),
    ("post", "/v1/admin/quotas/delete", "admin", "Delete a quota", QuotaKey, False),
    ("get", "/v1/admin/decisions", "admin", "The decision log", None, False),
    ("get", "/v1/admin/policies", "admin", "Serving policy revision and history", None, False),
    ("post", "/v1/admin/policies", "admin", "Push (validate, test, activate) a policy revision", PolicyPush, False),
    ("post", "/v1/admin/plugins", "plugins", "Install a plugin bundle (admin)", PluginInstall, False),
    ("get", "/v1/admin/plugins", "plugins", "Installed plugin versions", None, False),
    ("post", "/v1/admin/plugins/enable", "plugins", "Enable one version of a plugin (governance)", PluginVersion, False),
    ("post", "/v1/admin/plugins/disable", "plugins", "Disable a plugin (governance)", PluginName, False),
    ("post", "/v1/admin/plugins/remove", "plugins", "Remove an installed, disabled version (admin)", PluginVersion, False),
    ("post", "/v1/admin/agents", "admin", "Register an agent for agent.invoke (admin)", AgentRegistration, False),
    ("get", "/v1/admin/agents", "admin", "Registered agents (a governance token: its own team)", None, False),
    ("post", "/v1/admin/agents/remove", "admin", "Remove a registered agent (admin)", AgentKey, False),
    ("post", "/mcp", "agents", "MCP over streamable HTTP (JSON-RPC)", None, False),
    ("get", "/v1/openai/tools", "agents", "The callable catalog as OpenAI tools", None, False),
    ("post", "/v1/openai/tool_calls", "agents", "Run an assistant message's tool_calls", ToolCallsBody, False),
    ("get", "/healthz", "operations", "Liveness", None, True),
    ("get", "/readyz", "operations", "Readiness (Postgres, NATS, policy, catalog)", None, True),
    ("get", "/metrics", "operations", "Prometheus metrics", None, True),
    ("get", "/openapi.json", "operations", "This document", None, True),
]

ERROR_SCHEMA = {
    "type": "object",
    "required": ["ok", "error"],
    "properties": {
        "ok": {"const": False},
        "status": {"type": "string"},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "reasons": {"type": "array", "items": {"type": "string"}},
            },
        },
        "call_id": {"type": "string"},
        "decision_id": {"type": "string"},
    },
}


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for method, path, tag, summary, body, public in OPERATIONS:
        op: dict[str, Any] = {
            "tags": [tag],
            "summary": summary,
            "operationId": f"{method}_{path.strip('/').replace('/', '_').replace('{', '').replace('}', '')}",
            "responses": {
                "200": {"description": "success"},
                "default": {"description": "an error",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        }
        params = [p[1:-1] for p in path.split("/") if p.startswith("{")]
        if params:
            op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                                for p in params]
        if body is not None:
            schema = body.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[body.__name__] = schema
            op["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{body.__name__}"}}}}
        if public:
            op["security"] = []
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "Toolproxy", "version": "0.1.0",
                 "description": "A tool proxy for AI agents with a policy decision point."},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }
