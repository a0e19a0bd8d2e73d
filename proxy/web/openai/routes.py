"""The OpenAI-compatible surface: the callable catalog as OpenAI `tools`, and an assistant
message's `tool_calls` answered with one `role: tool` message each, through the same Pipeline
(the batch itself runs in proxy.core.tool_calls)."""

from __future__ import annotations

from aiohttp import web

from proxy.core.outcome import response_body
from proxy.core.tool_calls import ToolCallsBody, catalog_name, content, openai_tools, run_tool_calls
from proxy.web.body import read_model
from proxy.web.keys import APPROVAL_FLOW, PIPELINE, identity_of
from proxy.web.native import http_status
from proxy.web.responses import json_response

routes = web.RouteTableDef()


@routes.get("/v1/openai/tools")
async def list_tools(request: web.Request) -> web.Response:
    """`tools` to pass to a chat completion, and `names`: OpenAI name -> catalog name."""
    return json_response(200, await openai_tools(request.app[PIPELINE], identity_of(request)))


@routes.post("/v1/openai/tool_calls")
async def tool_calls(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, ToolCallsBody)
    outcomes = await run_tool_calls(request.app[PIPELINE], request.app[APPROVAL_FLOW], identity, body)
    messages, results = [], []
    for call, outcome in zip(body.tool_calls, outcomes, strict=True):
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": content(outcome, catalog_name(call.function.name))})
        results.append({"tool_call_id": call.id, "name": call.function.name,
                        "http_status": http_status(outcome), "body": response_body(outcome)})
    return json_response(200, {"messages": messages, "results": results})
