"""`toolproxy mcp-stdio`: an MCP server on stdin/stdout that relays every message to a proxy's
/mcp endpoint, for desktop MCP clients that only launch local processes.

It is a relay, not a second implementation: the proxy decides and answers everything, so a
call through stdio is the same call as through HTTP. The relay adds what HTTP carries outside
the body — the bearer token, the session id the proxy issued at `initialize`, the routing
headers of the stateless revision — and turns HTTP-level failures into JSON-RPC errors.
Requests are relayed concurrently; `notifications/cancelled` aborts the named request. If the
proxy no longer knows the session (it expired), the relay initializes again, as the client
did, and retries once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import aiohttp
import orjson

from proxy.web.mcp import modern
from proxy.web.mcp.protocol import INTERNAL_ERROR, PARSE_ERROR

SESSION_HEADER = "Mcp-Session-Id"
MAX_LINE = 4 << 20
MAX_IN_FLIGHT = 16


def mcp_endpoint(url: str) -> str:
    """The proxy's /mcp address from either the stack's base URL or the /mcp URL itself (the
    address every HTTP client is given): `http://h:8080`, `http://h:8080/` and
    `http://h:8080/mcp` all name `http://h:8080/mcp`. A set's endpoint (`/mcp/sets/NAME`) is
    kept as given."""
    base = url.rstrip("/")
    path = base.split("://", 1)[-1].partition("/")[2]
    if path == "mcp" or path.endswith("/mcp") or path.startswith("mcp/"):
        return base
    return base + "/mcp"


class Relay:
    def __init__(self, url: str, token: str, out: Any = None) -> None:
        self.url = mcp_endpoint(url)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.out = out or sys.stdout.buffer
        self.session_id: str | None = None
        self.version: str | None = None  # negotiated at initialize (handshake era)
        self.initialize: dict[str, Any] | None = None  # the client's, replayed if the session expires
        self.in_flight: dict[Any, asyncio.Task[None]] = {}
        self.gate = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.http: aiohttp.ClientSession | None = None

    def write(self, message: Any) -> None:
        self.out.write(orjson.dumps(message) + b"\n")
        self.out.flush()

    async def run(self, reader: asyncio.StreamReader) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(timeout=timeout) as self.http:
            tasks: set[asyncio.Task[None]] = set()
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the limit: it was dropped
                    self.write(_error(None, PARSE_ERROR, f"message over {MAX_LINE} bytes"))
                    continue
                if not line:
                    break
                if not line.strip():
                    continue
                task = asyncio.create_task(self.handle(line))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:  # stdin closed: let the answers already on their way arrive
                await asyncio.wait(tasks, timeout=30)

    async def handle(self, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.write(_error(None, PARSE_ERROR, "Parse error"))
            return
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            request_id = (message.get("params") or {}).get("requestId")
            task = self.in_flight.get(request_id)
            if task is not None:
                task.cancel()
        request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
        if request_id is None:
            await self.relay(message)
            return
        task = asyncio.current_task()
        assert task is not None
        self.in_flight[request_id] = task
        try:
            await self.relay(message)
        except asyncio.CancelledError:
            pass  # the client gave up on it: no answer is owed
        finally:
            self.in_flight.pop(request_id, None)

    async def relay(self, message: Any, *, retried: bool = False) -> None:
        request_id = message.get("id") if isinstance(message, dict) else None
        is_request = isinstance(message, dict) and "method" in message and "id" in message
        method = message.get("method") if isinstance(message, dict) else None
        if method == "initialize":
            self.initialize = message
        async with self.gate:
            try:
                status, headers, replies = await self.post(message)
            except aiohttp.ClientError as exc:
                if is_request:
                    self.write(_error(request_id, INTERNAL_ERROR, f"cannot reach the proxy: {exc}"))
                return
        if status == 404 and self.session_id is not None and method != "initialize" and not retried:
            if await self.reinitialize():
                await self.relay(message, retried=True)
                return
        if method == "initialize" and status == 200:
            self.session_id = headers.get(SESSION_HEADER)
            result = next((r.get("result") for r in replies if isinstance(r, dict)), None) or {}
            self.version = result.get("protocolVersion")
        if isinstance(message, list):
            if replies:
                self.write(replies)  # a batch is answered by one array
            return
        if not is_request:  # nothing is owed for a notification, even an error
            return
        for reply in replies:
            self.write(reply)
        if not replies and status != 202:
            self.write(_error(request_id, INTERNAL_ERROR, f"the proxy answered HTTP {status}",
                              {"http_status": status}))

    async def reinitialize(self) -> bool:
        if self.initialize is None:
            return False
        self.session_id = None
        status, headers, _ = await self.post(self.initialize)
        self.session_id = headers.get(SESSION_HEADER) if status == 200 else None
        return self.session_id is not None

    async def post(self, message: Any) -> tuple[int, dict[str, str], list[Any]]:
        """Status, headers and the JSON-RPC messages of the answer (an HTTP error body that is
        not JSON-RPC — e.g. a 401 — becomes a JSON-RPC error for the request)."""
        assert self.http is not None
        headers = dict(self.headers)
        params = message.get("params") if isinstance(message, dict) else None
        envelope = modern.envelope_version(params) if isinstance(params, dict) else None
        if isinstance(envelope, str) and isinstance(message.get("method"), str):
            headers.update(modern.routing_headers(message["method"], params, envelope))
        else:
            if self.session_id is not None:
                headers[SESSION_HEADER] = self.session_id
            if self.version is not None:
                headers[modern.VERSION_HEADER] = self.version
        async with self.http.post(self.url, data=orjson.dumps(message), headers=headers) as resp:
            body = await resp.read()
            kind = resp.content_type
            out_headers = dict(resp.headers)
            status = resp.status
        if status == 202 or not body:
            return status, out_headers, []
        if kind == "text/event-stream":
            return status, out_headers, _sse_messages(body)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, list) or (isinstance(data, dict) and data.get("jsonrpc") == "2.0"):
            return status, out_headers, data if isinstance(data, list) else [data]
        request_id = message.get("id") if isinstance(message, dict) else None
        if request_id is None:
            return status, out_headers, []
        err = (data or {}).get("error", {}) if isinstance(data, dict) else {}
        text = f"{err.get('code', 'http_error')}: {err.get('message', f'HTTP {status}')}"
        return status, out_headers, [_error(request_id, INTERNAL_ERROR, text, {"http_status": status})]


def _sse_messages(body: bytes) -> list[Any]:
    out = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if data:
            with contextlib.suppress(orjson.JSONDecodeError):
                out.append(orjson.loads(data))
    return out


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def serve(url: str, token: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await Relay(url, token).run(reader)


def main(url: str, token: str) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(url, token))
    return 0
