"""The MCP endpoint (streamable HTTP), served natively: POST /mcp answers with one JSON body.

Two protocol eras share the endpoint. The handshake era (2025-03-26 .. 2025-11-25):
`initialize` issues a signed, stateless Mcp-Session-Id (proxy/web/mcp/session.py) that every later
request carries. The stateless era (2026-07-28): each request carries its own envelope and
routing headers (proxy/web/mcp/modern.py). Either way the bearer token authenticates every
request (the auth middleware), and tools/call runs through the same Pipeline as
/v1/tools/invoke. GET (a server-to-client stream) and DELETE (session termination) are
answered 405, as the transport allows: the server sends nothing unprompted and keeps no
session to end. POST /mcp/sets/<name> is the same endpoint narrowed to a tool set of the
caller's team.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import orjson
import structlog
from aiohttp import web

from proxy.core.toolsets import is_valid_name
from proxy.web.keys import APPROVAL_FLOW, JOURNAL, PIPELINE, POOL, SETTINGS, TOOLSETS, identity_of
from proxy.identity.identity import Identity
from proxy.web.mcp import modern, task_wire
from proxy.web.mcp.handlers import Exchange, McpHandlers, ToolScope
from proxy.web.mcp.keys import TASK_WAKEUPS
from proxy.web.mcp.tasks import McpTasks
from proxy.web.mcp.protocol import (
    BATCH_VERSIONS,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_BATCH,
    MODERN_HTTP_STATUS,
    MODERN_VERSIONS,
    PARSE_ERROR,
    SUPPORTED_VERSIONS,
    McpError,
    Message,
    error_message,
    parse_message,
    readable_id,
    result_message,
    unsupported_version,
)
from proxy.web.mcp.session import codec_for
from proxy.web.responses import json_response
from proxy.core.input_rules import json_text_problem

log = structlog.get_logger("toolproxy.mcp")
routes = web.RouteTableDef()

SESSION_HEADER = "Mcp-Session-Id"
_handlers: weakref.WeakKeyDictionary[web.Application, McpHandlers] = weakref.WeakKeyDictionary()


def handlers_for(app: web.Application) -> McpHandlers:
    h = _handlers.get(app)
    if h is None:
        tasks = McpTasks(app[APPROVAL_FLOW], app[POOL], app[JOURNAL], app.get(TASK_WAKEUPS))
        h = _handlers[app] = McpHandlers(app[PIPELINE], app[APPROVAL_FLOW], tasks)
    return h


def _error(status: int, exc: McpError, request_id: Any = None,
           headers: dict[str, str] | None = None) -> web.Response:
    return json_response(exc.http_status or status, error_message(request_id, exc), headers)


@routes.post("/mcp")
async def post(request: web.Request) -> web.Response:
    return await _serve(request, None)


@routes.post("/mcp/sets/{name}")
async def post_set(request: web.Request) -> web.Response:
    """A tool set of the caller's team (proxy/core/toolsets.py): the same endpoint, its tools
    narrowed to the set. Another team's set, a deleted or an unknown one: not found, alike."""
    identity = identity_of(request)
    name = request.match_info["name"]
    tools = request.app[TOOLSETS].tools(identity.team_id, name) if is_valid_name(name) else None
    if tools is None:
        return _error(404, McpError(INVALID_REQUEST, f"no tool set {name!r} for this team",
                                    {"code": "toolset_not_found"}))
    return await _serve(request, ToolScope(name, tools))


async def _serve(request: web.Request, scope: ToolScope | None) -> web.Response:
    identity = identity_of(request)
    accept = request.headers.get("Accept", "")
    if accept and not any(t in accept for t in ("application/json", "application/*", "*/*")):
        return _error(406, McpError(INVALID_REQUEST, "Not Acceptable: accept application/json"))
    if request.body_exists and request.content_type not in ("application/json", ""):
        return _error(415, McpError(INVALID_REQUEST, "send the body as application/json"))
    try:
        data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _error(413, McpError(INVALID_REQUEST, f"the body exceeds {request.app[SETTINGS].max_body_bytes} bytes"))
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _error(400, McpError(PARSE_ERROR, "Parse error"))
    problem = json_text_problem(data)  # the native API's rule: refused before anything runs
    if problem is not None:  # (id null: the id itself may be what is refused)
        return _error(400, McpError(INVALID_REQUEST, problem, {"code": "invalid_request"}))
    header_version = request.headers.get(modern.VERSION_HEADER)
    if isinstance(obj, list):
        if header_version in MODERN_VERSIONS:
            return _error(400, McpError(INVALID_REQUEST, "a body is one JSON-RPC message at this revision"))
        return await _handshake(request, identity, obj, batch=True, scope=scope)
    try:
        msg = parse_message(obj)
    except McpError as exc:
        return _error(400, exc, readable_id(obj))
    if msg.kind == "request" and msg.method == "initialize":
        return _initialize(request, identity, msg)
    if header_version is not None and header_version not in SUPPORTED_VERSIONS:
        return _error(400, unsupported_version(header_version), msg.id)
    if header_version in MODERN_VERSIONS or (
            header_version is None and request.headers.get(SESSION_HEADER) is None
            and modern.envelope_version(msg.params) is not None):
        return await _modern(request, identity, msg, scope)
    return await _handshake(request, identity, [obj], batch=False, scope=scope)


def _initialize(request: web.Request, identity: Identity, msg: Message) -> web.Response:
    assert msg.id is not None
    handlers = handlers_for(request.app)
    try:
        version, result = handlers.initialize(msg.params)
    except McpError as exc:
        return _error(200, exc, msg.id)
    session_id = codec_for(request.app).issue(
        identity, version, tasks=handlers.client_takes_tasks(version, msg.params))
    log.info("mcp_session_started", protocol_version=version)
    return json_response(200, result_message(msg.id, result), {SESSION_HEADER: session_id})


async def _handshake(request: web.Request, identity: Identity, items: list[Any], *,
                     batch: bool, scope: ToolScope | None) -> web.Response:
    session_id = request.headers.get(SESSION_HEADER)
    first_id = None if batch else readable_id(items[0])
    if session_id is None:
        return _error(400, McpError(INVALID_REQUEST, f"Bad Request: {SESSION_HEADER} is required; "
                                    "send initialize first"), first_id)
    session = codec_for(request.app).open(session_id, identity)
    if session is None:  # not ours, another identity's, or expired: the client initializes again
        return _error(404, McpError(INVALID_REQUEST, "Session not found; initialize a new session"),
                      first_id)
    version = session.protocol_version
    # Any version this server supports is accepted in the header, as the reference server
    # does (the session's negotiated version still governs the exchange); an unknown one is
    # refused before (post()).
    headers = {SESSION_HEADER: session_id}
    if not batch and isinstance(items[0], dict):
        try:
            modern.check_routing(parse_message(items[0]), request.headers, name_required=False)
        except McpError as exc:
            return _error(400, exc, first_id)
    if batch:
        if version not in BATCH_VERSIONS:
            return _error(400, McpError(INVALID_REQUEST, f"JSON-RPC batches are not part of protocol {version}"))
        if not 0 < len(items) <= MAX_BATCH:
            return _error(400, McpError(INVALID_REQUEST, f"a batch holds 1 to {MAX_BATCH} messages"))
    ex = Exchange(identity, version, tasks=session.tasks, scope=scope)
    answers = await asyncio.gather(*(_answer(request.app, ex, item, in_batch=batch) for item in items))
    replies = [a for a in answers if a is not None]
    if not replies:  # only notifications or responses
        return web.Response(status=202, headers=headers)
    return json_response(200, replies if batch else replies[0], headers)


async def _answer(app: web.Application, ex: Exchange, item: Any, *, in_batch: bool) -> dict[str, Any] | None:
    try:
        msg = parse_message(item)
    except McpError as exc:
        return error_message(readable_id(item), exc)
    if msg.kind != "request":
        return None
    if msg.method == "initialize":
        return error_message(msg.id, McpError(INVALID_REQUEST, "initialize must be sent on its own"))
    return await _dispatch(app, ex, msg)


async def _dispatch(app: web.Application, ex: Exchange, msg: Message) -> dict[str, Any]:
    assert msg.id is not None
    try:
        return result_message(msg.id, await handlers_for(app).dispatch(ex, msg.method, msg.params))
    except McpError as exc:
        return error_message(msg.id, exc)
    except Exception:
        log.exception("mcp_handler_failed", method=msg.method)
        return error_message(msg.id, McpError(INTERNAL_ERROR, "internal error"))


async def _modern(request: web.Request, identity: Identity, msg: Message,
                  scope: ToolScope | None) -> web.Response:
    if msg.kind != "request":
        given = request.headers.get(modern.VERSION_HEADER, "")
        if msg.kind == "notification" and given not in MODERN_VERSIONS:
            return _error(400, unsupported_version(given))
        return web.Response(status=202)  # acknowledged and dropped: nothing to act on
    raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
    try:
        version = modern.check_request(msg, request.headers, raw)
    except McpError as exc:
        return _error(400, exc, msg.id)
    ex = Exchange(identity, version, tasks=task_wire.declares_extension(msg.params), scope=scope)
    reply = await _dispatch(request.app, ex, msg)
    status = MODERN_HTTP_STATUS.get(reply["error"]["code"], 200) if "error" in reply else 200
    return json_response(status, reply)
