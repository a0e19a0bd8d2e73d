"""The operations of governance's whole catalog and of tool sets: /v1/admin/catalog,
/v1/admin/toolsets and each set's MCP endpoint /mcp/sets/{name}."""

from __future__ import annotations

from proxy.core.toolsets import MAX_TOOLS, NAME_PATTERN
from proxy.web.admin.catalog import MAX_LIMIT
from proxy.web.admin.catalog_sources import SOURCES
from proxy.web.admin.toolsets import ToolSetBody
from proxy.core.input_rules import TOOL_NAME_PATTERN
from proxy.web.openapi.operations import GOVERNANCE, TEAM, Op, Param, _int
from proxy.web.openapi.schemas import BOOL, STR, Schema, array_of, listing, obj, ref

NULLABLE_STR: Schema = {"type": ["string", "null"]}
SET_NAME = Param("name", {"type": "string", "pattern": NAME_PATTERN, "maxLength": 64}, where="path")
PIN: Schema = {"type": ["object", "null"], "required": ["state"], "properties": {
    "state": STR, "hash": NULLABLE_STR, "version": STR, "current_hash": STR, "upstream": STR}}
CATALOG_TOOL: Schema = obj(
    ["tool_id", "source", "category", "action", "requires_approval", "network", "available",
     "pin", "capability"], {
        "tool_id": STR, "source": {"enum": list(SOURCES)}, "version": NULLABLE_STR,
        "category": NULLABLE_STR, "action": NULLABLE_STR, "risk": NULLABLE_STR,
        "cost": {"type": ["object", "null"]}, "requires_approval": {"type": ["boolean", "null"]},
        "network": BOOL, "description": STR, "input_schema": {"type": ["object", "null"]},
        "output_schema": {"type": ["object", "null"]},
        "timeout_ms": {"type": ["integer", "null"]}, "capability": STR, "available": BOOL,
        "pin": PIN})
TOOLSET: Schema = obj(
    ["team_id", "name", "tools", "description", "endpoint", "created_by", "created_at",
     "updated_by", "updated_at"], {
        "team_id": STR, "name": STR, "tools": {**array_of(STR), "maxItems": MAX_TOOLS},
        "description": STR, "endpoint": STR, "created_by": STR, "created_at": STR,
        "updated_by": STR, "updated_at": STR})
SET_TEAM = Param("team_id", TEAM.schema, description="the set's team (admins; governance: its own only)")

CATALOG_OPERATIONS: list[Op] = [
    Op("get", "/v1/admin/catalog", "governance",
       "Every tool with its source, classification, pin and availability (unfiltered by policy)",
       {200: obj(["tools", "next"], {"tools": array_of(CATALOG_TOOL), "next": NULLABLE_STR}),
        **GOVERNANCE},
       params=(Param("source", {"enum": list(SOURCES)}),
               Param("after", {"type": "string", "pattern": TOOL_NAME_PATTERN, "maxLength": 64},
                     description="the last tool name already seen (the previous page's `next`)"),
               Param("limit", _int(1, MAX_LIMIT, 100)))),
    Op("post", "/v1/admin/toolsets", "governance",
       "Create or replace a team's tool set, served at /mcp/sets/{name}",
       {201: obj(["toolset", "created"], {"toolset": TOOLSET, "created": {"const": True}}),
        200: obj(["toolset", "created"], {"toolset": TOOLSET, "created": {"const": False}}),
        **GOVERNANCE, 404: ref("Error"), 409: ref("Error")}, ToolSetBody),
    Op("get", "/v1/admin/toolsets", "governance", "Tool sets (governance: its own team's)",
       {200: listing("toolsets", TOOLSET), **GOVERNANCE}, params=(TEAM,)),
    Op("get", "/v1/admin/toolsets/{name}", "governance", "One tool set of a team",
       {200: obj(["toolset"], {"toolset": TOOLSET}), **GOVERNANCE, 404: ref("Error")},
       params=(SET_NAME, SET_TEAM)),
    Op("delete", "/v1/admin/toolsets/{name}", "governance", "Delete a tool set",
       {200: obj(["toolset", "deleted"], {"toolset": TOOLSET, "deleted": {"const": True}}),
        **GOVERNANCE, 404: ref("Error")}, params=(SET_NAME, SET_TEAM)),
    Op("post", "/mcp/sets/{name}", "agents",
       "MCP over streamable HTTP, narrowed to a tool set of the caller's team (same policy)",
       {200: {"oneOf": [ref("JsonRpcResponse"), array_of(ref("JsonRpcResponse"))]}, 202: None,
        404: ref("JsonRpcError"), 406: ref("JsonRpcError"),
        403: {"oneOf": [ref("JsonRpcError"), ref("Error")]}},
       {"oneOf": [ref("JsonRpcMessage"), {**array_of(ref("JsonRpcMessage")), "minItems": 1, "maxItems": 16}]},
       params=(SET_NAME,),
       errors={400: {"oneOf": [ref("JsonRpcError"), ref("Error")]}, 401: ref("Error"),
               413: ref("JsonRpcError"), 415: ref("JsonRpcError")}),
]
