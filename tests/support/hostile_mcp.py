"""A hostile upstream for the bad-input tests: a small aiohttp server speaking MCP's streamable
HTTP (handshake era: it refuses server/discover as unknown, answers initialize) that, on
tools/list or tools/call, does what a broken or malicious server does: hang, answer malformed
JSON-RPC, answer 50 MB, or close the connection mid-answer."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from tests.support.loopback import serve

STOPPING = web.AppKey("stopping", asyncio.Event)
TOOL = {"name": "probe", "description": "A tool.", "inputSchema": {"type": "object"}}


def hostile_app(behaviour: dict[str, str], seen: dict[str, Any] | None = None) -> web.Application:
    """`behaviour[method]`: "hang" | "malformed" | "huge" | "cut" | "ok" (default), and for
    tools/list "paged" (a tool a page, `seen["pages"]` pages, endless when None). `seen` counts
    the sessions begun (`sessions`, each named by `Mcp-Session-Id`) and the tools/call
    requests that arrived (`calls`, and `calls_by_session`), and may set the tool's
    `description` (a rug pull between two syncs) and the `content` blocks its calls answer."""
    seen = seen if seen is not None else {}

    async def mcp(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        msg = await request.json()
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:  # a notification
            return web.Response(status=202)
        if method == "server/discover":
            return _json({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
        if method == "initialize":  # each session named, so that calls say whose they are
            seen["sessions"] = seen.get("sessions", 0) + 1
            return _json({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "hostile", "version": "1"}}},
                headers={"Mcp-Session-Id": f"s-{seen['sessions']}"})
        if method == "tools/call":
            seen["calls"] = seen.get("calls", 0) + 1
            by = seen.setdefault("calls_by_session", {})
            session = request.headers.get("Mcp-Session-Id", "")
            by[session] = by.get(session, 0) + 1
        what = behaviour.get(method, "ok")
        if what == "hang":  # until the server stops (its cleanup does not wait an hour)
            await request.app[STOPPING].wait()
            return web.Response(status=503)
        if what == "malformed":
            return web.Response(body=b'{"jsonrpc": "2.0", "id": ' + str(rid).encode() + b', "result": {',
                                content_type="application/json")
        if what == "huge":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await resp.write(b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % rid)
            chunk = b"x" * (1 << 20)
            for _ in range(50):
                await resp.write(chunk)
            await resp.write(b'"}]}}')
            return resp
        if what == "cut":
            resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "5000"})
            await resp.prepare(request)
            await resp.write(b'{"jsonrpc": "2.0", "id": ')
            assert request.transport is not None
            request.transport.close()
            return resp
        if method == "tools/list" and what == "paged":  # a tool a page, `seen["pages"]` of them
            at = int(((msg.get("params") or {}).get("cursor")) or 0)
            page: dict[str, Any] = {"tools": [{**TOOL, "name": f"probe{at}"}]}
            if seen.get("pages") is None or at + 1 < seen["pages"]:  # None: a cursor that never ends
                page["nextCursor"] = str(at + 1)
            return _json({"jsonrpc": "2.0", "id": rid, "result": page})
        if method == "tools/list":
            tool = {**TOOL, "description": seen.get("description", TOOL["description"])}
            return _json({"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}})
        if method == "tools/call":
            content = seen.get("content", [{"type": "text", "text": "ok"}])
            return _json({"jsonrpc": "2.0", "id": rid, "result": {"content": content}})
        return _json({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "unknown"}})

    app = web.Application()
    app[STOPPING] = asyncio.Event()

    async def stopping(app: web.Application) -> None:
        app[STOPPING].set()

    app.on_shutdown.append(stopping)
    app.router.add_route("*", "/mcp", mcp)
    return app


def _json(body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json", headers=headers)


async def start_hostile(behaviour: dict[str, str],
                        seen: dict[str, Any] | None = None) -> tuple[web.AppRunner, str]:
    runner, port = await serve(hostile_app(behaviour, seen))
    return runner, f"http://127.0.0.1:{port}/mcp"
