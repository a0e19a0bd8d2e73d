"""Reaching the MCP surface in tests: the official SDK's client (streamable HTTP, and stdio through
`toolproxy mcp-stdio`), raw JSON-RPC posts the client library would hide, and a session."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.calls import bearer

ROOT = Path(__file__).resolve().parents[2]
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextlib.asynccontextmanager
async def mcp_http(url: str, tok: str, mode: str = "legacy",
                   transport: httpx2.AsyncBaseTransport | None = None) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP; mode "legacy" (initialize) or "auto" (discover)."""
    http = httpx2.AsyncClient(headers=bearer(tok), transport=transport, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as c:
        yield c


@contextlib.asynccontextmanager
async def mcp_stdio(base_url: str, tok: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """The SDK's client launching `toolproxy mcp-stdio` as a desktop client would."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cli.main", "mcp-stdio", "--url", base_url],
        env={**os.environ, "TOOLPROXY_TOKEN": tok}, cwd=str(ROOT))
    async with Client(params, mode=mode) as c:
        yield c


def mcp_url(client: Any) -> str:
    return str(client.make_url("/mcp"))


def base_url(client: Any) -> str:
    return str(client.make_url("/")).rstrip("/")


async def raw(client: Any, tok: str | None, body: Any, **headers: str) -> tuple[int, Any, Any]:
    h = {**ACCEPT, **headers, **(bearer(tok) if tok else {})}
    r = await client.post("/mcp", json=body, headers=h)
    text = await r.text()
    return r.status, (orjson.loads(text) if text else None), r.headers


def init_body(version: str = LEGACY, request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}


async def session_of(client: Any, tok: str, version: str = LEGACY) -> str:
    status, body, headers = await raw(client, tok, init_body(version))
    assert status == 200 and body["result"]["protocolVersion"] == version, body
    return headers["Mcp-Session-Id"]
