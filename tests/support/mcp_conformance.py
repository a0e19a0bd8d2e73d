"""The tools the official conformance suite calls by name (the reference server's fixtures),
served by a test service so its tools/call and JSON Schema 2020-12 scenarios test what the
proxy does with any tool: a text result, an error result, a schema listed as declared."""

from __future__ import annotations

from typing import Any

from services.sdk import CallContext, Service, ToolError, tool

_EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
_STRING = {"type": "string", "maxLength": 200}


@tool(tool_id="test_simple_text", category="A", action="read", input_schema=_EMPTY,
      description="Returns a simple text (the conformance suite's fixture).")
async def simple_text(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"text": "This is a simple text response for testing."}


@tool(tool_id="test_error_handling", category="A", action="read", input_schema=_EMPTY,
      description="Always fails (the conformance suite's fixture).")
async def error_handling(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    raise ToolError("This tool intentionally returns an error for testing")


@tool(tool_id="json_schema_2020_12_tool", category="A", action="read",
      description="Takes a name and an address ($defs, the conformance suite's fixture).",
      input_schema={
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "type": "object",
          "$defs": {"address": {"type": "object", "properties": {"street": _STRING, "city": _STRING},
                                "additionalProperties": False}},
          "properties": {"name": _STRING, "address": {"$ref": "#/$defs/address"}},
          "additionalProperties": False,
      })
async def json_schema_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"received": args}


TOOLS = ("test_simple_text", "test_error_handling", "json_schema_2020_12_tool")


def conformance_service() -> Service:
    return Service(name="conformance-fixtures", tools=[simple_text, error_handling, json_schema_tool],
                   heartbeat_s=0.5)
