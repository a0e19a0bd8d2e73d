"""One upstream MCP server, connected with the official `mcp` SDK (either protocol era: the
client probes server/discover and falls back to initialize): a session kept open by a task of
its own, reconnected with backoff, bounded in concurrency, with a breaker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
import structlog
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from services.sdk.errors import ToolError, UpstreamTimeout
from services.upstreams.breaker import Breaker
from services.upstreams.errors import (
    AuthorizationUnavailable,
    GrantRefused,
    UpstreamError,
    UpstreamUnavailable,
)
from services.upstreams.oauth import BearerAuth, TokenSource

log = structlog.get_logger("toolproxy.upstreams.link")

CLOSE_TIMEOUT_S = 5.0  # how long close() waits for the session loop to end
MAX_LIST_PAGES = 50  # tools/list pages one sync follows (a cursor that never ends stops here)
MAX_TOOLS = 1000
CONNECT_TIMEOUT_S = 15.0


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self._inner, self._limit, self._seen = inner, limit, 0

    async def __aiter__(self):  # type: ignore[override]
        async for chunk in self._inner:
            self._seen += len(chunk)
            if self._seen > self._limit:
                raise httpx2.StreamError(f"the upstream's answer exceeds {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncHTTPTransport):
    """No answer body larger than `limit` is read (a JSON answer is otherwise unbounded)."""

    def __init__(self, limit: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        response.stream = _BoundedStream(response.stream, self._limit)
        return response


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How to reach one upstream: a URL with its headers, or a confined command."""

    name: str
    url: str | None = None
    headers: dict[str, str] | None = None
    stdio: StdioServerParameters | None = None
    max_bytes: int = 4 << 20
    timeout_s: float = 5.0
    max_concurrency: int = 8
    ping_every_s: float = 10.0  # an idle session is checked this often (availability follows it)
    tokens: TokenSource | None = None  # OAuth client credentials: each request carries its token


class Link:
    def __init__(self, endpoint: Endpoint, breaker: Breaker, *,
                 on_list_changed: Callable[[], Awaitable[None]] | None = None,
                 on_health: Callable[[], None] | None = None,
                 precheck: Callable[[], Awaitable[None]] | None = None) -> None:
        self.endpoint = endpoint
        self._precheck = precheck
        self.breaker = breaker
        self._on_list_changed = on_list_changed
        self._on_health = on_health
        self._client: Client | None = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(endpoint.max_concurrency)
        self._inflight = 0
        self._broken = asyncio.Event()
        self._closing = False  # set by close(): the session loop ends whatever became of the cancel
        self.last_error: str | None = None
        self._auth_failure: ToolError | None = None  # why no token: answered at once, typed
        self._auth_failed = asyncio.Event()

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the session speaks (which era), None while not connected."""
        client = self._client
        try:
            return client.protocol_version if client is not None else None
        except Exception:  # noqa: BLE001 - not negotiated yet
            return None

    @property
    def healthy(self) -> bool:
        return self._client is not None and not self.breaker.open

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"upstream:{self.endpoint.name}")

    async def close(self) -> None:
        """Ends the session loop. The MCP client runs anyio task groups, which may turn the
        task's cancellation into an exception group or absorb it: the loop also stops on its
        own flag (and the wait for a broken session ends), and the wait here is bounded."""
        self._closing = True
        self._broken.set()
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=CLOSE_TIMEOUT_S)
            if not done:
                log.warning("upstream_link_close_timeout", upstream=self.endpoint.name)
            elif not task.cancelled() and task.exception() is not None:
                log.info("upstream_link_closed_with", upstream=self.endpoint.name,
                         error=_describe(task.exception()))
        if self.endpoint.tokens is not None:
            await self.endpoint.tokens.close()

    async def _run(self) -> None:
        backoff = 0.2
        while not self._closing:
            try:
                if self._precheck is not None:  # netguard, before every connection
                    await self._precheck()
                if self.endpoint.tokens is not None:  # no token, no connection: nothing forwarded
                    try:
                        await self.endpoint.tokens.token()
                    except (AuthorizationUnavailable, GrantRefused) as exc:
                        self._auth_failure = exc
                        self._auth_failed.set()
                        raise
                    self._auth_failure = None
                    self._auth_failed.clear()
                async with self._client_for() as client:
                    self._client, backoff = client, 0.2
                    self.last_error = None
                    if self._closing:
                        return
                    self._broken.clear()
                    self._connected.set()
                    self._health()
                    helpers = [asyncio.create_task(self._listen(client)),
                               asyncio.create_task(self._ping(client))]
                    try:
                        await self._broken.wait()
                    finally:
                        for task in helpers:
                            task.cancel()
                        for task in helpers:
                            with contextlib.suppress(BaseException):
                                await task
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - anyio groups: any failure reconnects
                if self._closing:  # a cancellation the client's task groups wrapped
                    return
                self.last_error = _describe(exc)
                log.info("upstream_link_down", upstream=self.endpoint.name, error=self.last_error)
            finally:
                self._client = None
                self._connected.clear()
                self._health()
            if self._closing:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    def _health(self) -> None:
        if self._on_health is not None:
            self._on_health()

    def _client_for(self) -> Client:
        e = self.endpoint
        transport: Any
        if e.stdio is not None:
            transport = stdio_client(e.stdio, errlog=_devnull())
        else:
            assert e.url is not None
            http = httpx2.AsyncClient(
                headers=e.headers or {}, follow_redirects=False,
                timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=300.0),
                transport=BoundedTransport(e.max_bytes),
                auth=BearerAuth(e.tokens) if e.tokens is not None else None)
            transport = streamable_http_client(e.url, http_client=http)
        return Client(transport, mode="auto", cache=None, message_handler=self._on_message,
                      raise_exceptions=False)

    async def _ping(self, client: Client) -> None:
        """A session nobody uses is still checked: one that stopped answering is started again
        (its tools drop out of the catalog meanwhile)."""
        while True:
            await asyncio.sleep(self.endpoint.ping_every_s)
            if self._inflight:
                continue  # busy: its calls tell how it is
            try:
                async with asyncio.timeout(max(self.endpoint.timeout_s, 1.0)):
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        await client.session.discover()  # the stateless era has no ping
                    else:  # the handshake era's ping (deprecated only for the stateless era)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", MCPDeprecationWarning)
                            await client.send_ping()
            except asyncio.CancelledError:
                raise
            except MCPError:
                continue  # it answered (an error is an answer): alive
            except BaseException as exc:  # noqa: BLE001 - no answer, a broken stream: reconnect
                self.last_error = _describe(exc)
                self._broken.set()
                return

    async def _listen(self, client: Client) -> None:
        """The stateless era's list changes: a subscriptions/listen stream (the handshake era's
        notifications/tools/list_changed arrive through _on_message instead)."""
        if self._on_list_changed is None or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    asyncio.get_running_loop().create_task(self._on_list_changed())
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - not offered, or the stream dropped: periodic syncs remain
            log.info("upstream_listen_ended", upstream=self.endpoint.name, error=_describe(exc))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._on_list_changed:
            asyncio.get_running_loop().create_task(self._on_list_changed())

    async def _ready(self, timeout_s: float) -> Client:
        if self.breaker.open:
            raise UpstreamUnavailable(f"{self.endpoint.name} is failing; its breaker is open")
        if not self._connected.is_set() and self._auth_failure is None:
            waits = [asyncio.ensure_future(self._connected.wait()),
                     asyncio.ensure_future(self._auth_failed.wait())]
            try:  # connected, or no token to be had (answered at once with its code)
                await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        if self._connected.is_set() and self._client is not None:
            return self._client
        if self._auth_failure is not None:
            raise self._auth_failure
        raise UpstreamUnavailable(
            f"{self.endpoint.name} cannot be reached: {self.last_error or 'not connected'}")

    async def list_tools(self) -> list[types.Tool]:
        """Every page of tools/list (bounded in pages and tools), each page within twice the
        upstream's timeout (at least a second)."""
        client = await self._ready(CONNECT_TIMEOUT_S)
        timeout_s = min(max(self.endpoint.timeout_s * 2, 1.0), CONNECT_TIMEOUT_S)
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await self._request(lambda: client.list_tools(cursor=cursor), timeout_s)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS:
                break
        return tools[:MAX_TOOLS]

    async def call_tool(self, name: str, args: dict[str, Any], timeout_s: float) -> types.CallToolResult:
        deadline = time.monotonic() + timeout_s
        client = await self._ready(min(timeout_s, CONNECT_TIMEOUT_S))
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamTimeout(f"{self.endpoint.name} is at its concurrency bound") from None
        self._inflight += 1
        try:
            result = await self._request(lambda: client.call_tool(name, args),
                                         max(deadline - time.monotonic(), 0.0))
        finally:
            self._inflight -= 1
            self._slots.release()
        if not isinstance(result, types.CallToolResult):
            raise UpstreamError(f"{self.endpoint.name} answered no tool result")
        return result

    async def _request(self, send: Callable[[], Awaitable[Any]], timeout_s: float) -> Any:
        try:
            async with asyncio.timeout(timeout_s):
                result = await send()
        except TimeoutError:
            self.breaker.failure()
            raise UpstreamTimeout(f"{self.endpoint.name} did not answer within "
                                  f"{int(timeout_s * 1000)} ms") from None
        except MCPError as exc:
            tokens = self.endpoint.tokens
            if tokens is not None and tokens.failure is not None:  # "connection closed": no token
                self.breaker.failure()
                self._broken.set()
                raise tokens.failure from None
            self.breaker.success()  # it answered: a JSON-RPC error is the upstream's own word
            raise UpstreamError(f"{self.endpoint.name}: {str(exc)[:500]}") from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - a broken stream, a bad frame, too large
            self.breaker.failure()
            self._broken.set()  # start again with a fresh session
            tokens = self.endpoint.tokens
            if (auth := _auth_failure(exc) or (tokens.failure if tokens else None)) is not None:
                raise auth from None
            raise UpstreamError(f"{self.endpoint.name}: {_describe(exc)}") from None
        self.breaker.success()
        return result


def _auth_failure(exc: BaseException | None, depth: int = 0) -> ToolError | None:
    """The token failure inside what the SDK raised (a group, a cause), if that is what it was."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, AuthorizationUnavailable | GrantRefused):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _auth_failure(inner, depth + 1)) is not None:
                return found
    return _auth_failure(exc.__cause__ or exc.__context__, depth + 1)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _devnull() -> Any:
    return open(os.devnull, "w")  # noqa: SIM115 - the subprocess owns it for its lifetime
