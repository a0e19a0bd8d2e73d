"""The operations of upstreams (MCP servers and OpenAPI services): /v1/admin/upstreams and
/v1/admin/openapi."""

from __future__ import annotations

from proxy.web.admin.openapi import OpenApiBody
from proxy.web.admin.upstreams import Approval, Classification, UpstreamBody
from proxy.web.openapi.operations import GOVERNANCE, Op, Param
from proxy.web.openapi.schemas import STR, Schema, array_of, obj, ref
from services.upstreams.store import NAME_PATTERN

UPSTREAM_NAME = Param("name", {"type": "string", "pattern": NAME_PATTERN, "maxLength": 32}, where="path")
TOOL = Param("tool", {"type": "string", "minLength": 1, "maxLength": 128}, where="path",
             description="the upstream's own name of the tool (an OpenAPI operationId)")
UPSTREAM: Schema = {"type": "object", "required": ["name", "transport"], "properties": {
    "name": STR, "transport": {"enum": ["streamable_http", "stdio", "openapi"]}}}
TOOL_ROW: Schema = {"type": "object", "required": ["tool", "state", "hash"], "properties": {
    "tool": STR, "tool_id": {"type": ["string", "null"]},
    "state": {"enum": ["candidate", "classified", "changed", "gone"]}, "hash": STR}}
TOOLS: Schema = obj(["tools"], {"tools": array_of(TOOL_ROW)})
FAILED_SYNC = {424: ref("Error"), 503: ref("Error")}
_PLATFORM = "admins, or governance of a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS"

UPSTREAM_OPERATIONS: list[Op] = [
    Op("post", "/v1/admin/upstreams", "admin", "Register an upstream MCP server (admins)",
       {201: obj(["upstream"], {"upstream": UPSTREAM}), **GOVERNANCE, 409: ref("Error")}, UpstreamBody),
    Op("post", "/v1/admin/openapi", "admin",
       "Register an OpenAPI service as an upstream of transport openapi (admins)",
       {201: obj(["upstream", "operations"], {"upstream": UPSTREAM, "operations": {"type": "integer"}}),
        **GOVERNANCE, 409: ref("Error"), 424: ref("Error")}, OpenApiBody),
    Op("get", "/v1/admin/upstreams", "admin", "Registered upstreams (never their secrets)",
       {200: obj(["upstreams"], {"upstreams": array_of(UPSTREAM)}), **GOVERNANCE}),
    Op("get", "/v1/admin/upstreams/{name}", "admin", "One upstream",
       {200: obj(["upstream"], {"upstream": UPSTREAM}), **GOVERNANCE, 404: ref("Error")},
       params=(UPSTREAM_NAME,)),
    Op("delete", "/v1/admin/upstreams/{name}", "admin", "Remove an upstream and its tools (admins)",
       {200: obj(["deleted", "name"], {"deleted": {"const": True}, "name": STR}), **GOVERNANCE,
        404: ref("Error")}, params=(UPSTREAM_NAME,)),
    Op("post", "/v1/admin/upstreams/{name}/sync", "admin",
       f"List the upstream's tools again and compare them with their pins ({_PLATFORM})",
       {200: TOOLS, **GOVERNANCE, 404: ref("Error"), **FAILED_SYNC}, params=(UPSTREAM_NAME,),
       body_required=False),
    Op("get", "/v1/admin/upstreams/{name}/tools", "admin",
       "The upstream's tools: candidates, classified, changed (beside their pin) and gone",
       {200: TOOLS, **GOVERNANCE, 404: ref("Error")}, params=(UPSTREAM_NAME,)),
    Op("post", "/v1/admin/upstreams/{name}/tools/{tool}/classify", "admin",
       f"Classify a tool into the catalog, pinned to its current definition ({_PLATFORM})",
       {200: obj(["tool"], {"tool": TOOL_ROW}), **GOVERNANCE, 404: ref("Error"), 409: ref("Error")},
       Classification, params=(UPSTREAM_NAME, TOOL)),
    Op("post", "/v1/admin/upstreams/{name}/tools/{tool}/approve", "admin",
       f"Pin a changed tool's new definition, by the hash governance read ({_PLATFORM})",
       {200: obj(["tool"], {"tool": TOOL_ROW}), **GOVERNANCE, 404: ref("Error"), 409: ref("Error")},
       Approval, params=(UPSTREAM_NAME, TOOL)),
]
UPSTREAM_OPERATIONS.append(
    Op("get", "/console/api/upstreams/tool-states", "console",
       "How many of each upstream's tools are in each state (for the console's upstreams page)",
       {200: obj(["upstreams"], {"upstreams": {"type": "object", "additionalProperties": {
           "type": "object", "additionalProperties": {"type": "integer"}}}}), **GOVERNANCE}))
