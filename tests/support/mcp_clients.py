"""The third-party MCP clients the tests drive, from their cache outside the repo
(tests/support/npm/install.sh puts them there): Node 22 with the official conformance suite and
TypeScript SDK and the MCP Inspector, and langchain-mcp-adapters in a venv of its own. Plus the one piece the
conformance suite needs from us: it cannot send a bearer token (0.1.16), so it talks to a
loopback shim that adds the header and passes everything else through untouched."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TOOLPROXY_MCP_CLIENTS", Path.home() / ".cache/toolproxy/mcp-clients"))
NODE = CACHE / "node_modules/.bin/node"
CONFORMANCE = CACHE / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
TS_SDK = CACHE / "node_modules/@modelcontextprotocol/sdk/package.json"
INSPECTOR = CACHE / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
LANGCHAIN_PYTHON = CACHE / "langchain-venv/bin/python"
SCRIPTS = Path(__file__).resolve().parent / "npm"
NAME_RE = r"^[a-zA-Z0-9_-]{1,64}$"


def missing(*paths: Path) -> str | None:
    """Why a test must skip: the first piece not installed (None when all are)."""
    for p in paths:
        if not p.exists():
            return (f"{p} is not installed: `bash tests/support/npm/install.sh` installs it "
                    "(make test runs it; it needs the npm registry and PyPI)")
    return None


def node_script(name: str) -> Path:
    """A script of tests/support/npm, copied beside the cached node_modules (ES modules
    resolve packages from where the script is)."""
    run = CACHE / "run"
    run.mkdir(exist_ok=True)
    target = run / name
    shutil.copyfile(SCRIPTS / name, target)
    return target


# Hop-by-hop headers are the shim's own business, never forwarded.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "content-length"}


@dataclass
class Shim:
    url: str  # what the client is given: http://127.0.0.1:PORT/mcp
    upstream: str  # the proxy's base URL (may be set once the proxy is up)

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/mcp")


@contextlib.asynccontextmanager
async def bearer_shim(upstream: str, token: str) -> AsyncIterator[Shim]:
    """http://127.0.0.1:PORT/mcp, forwarding to the proxy at `upstream` (its base URL) every request to `upstream` with `Authorization:
    Bearer <token>` added; Host, Origin and every other header go through as sent (the suite's
    DNS-rebinding scenario depends on it), and the answer comes back as it came."""
    session = aiohttp.ClientSession(auto_decompress=False)
    shim: Shim

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["Authorization"] = f"Bearer {token}"
        body = await request.read()
        async with session.request(request.method, shim.upstream.rstrip("/") + request.rel_url.raw_path_qs,
                                   headers=headers, data=body, allow_redirects=False,
                                   skip_auto_headers={"User-Agent", "Accept-Encoding"}) as r:
            out = web.StreamResponse(status=r.status, headers={
                k: v for k, v in r.headers.items() if k.lower() not in _HOP})
            await out.prepare(request)
            async for chunk in r.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    shim = Shim(f"http://127.0.0.1:{port}/mcp", upstream)
    try:
        yield shim
    finally:
        await runner.cleanup()
        await session.close()


async def run(*argv: str, timeout: float = 120, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})}, cwd=str(cwd or CACHE))
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()
