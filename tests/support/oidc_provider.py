"""The real OpenID provider of the tests: `oidc-provider` (npm), installed with `npm ci` from
tests/support/oidc/package-lock.json into a cache outside the repository
(~/.cache/toolproxy/npm/oidc-<lock hash>/, or TOOLPROXY_NPM_CACHE), once per lock file, and
run by Node on a free loopback port (tests/support/oidc/provider.mjs says which clients and
accounts it has)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent / "oidc"
RESOURCE = "https://toolproxy.test"  # the audience tests ask tokens for (and the proxy accepts)
RESOURCE_SCOPES = "mcp tool.math.invoke tool.text.invoke tool.memory.invoke"


def cache_dir() -> Path:
    base = Path(os.environ.get("TOOLPROXY_NPM_CACHE") or Path.home() / ".cache" / "toolproxy" / "npm")
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:12]
    return base / f"oidc-{digest}"


def install() -> tuple[Path | None, str]:
    """(the directory the provider runs from, "") or (None, why it cannot run here)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "Node.js and npm are not installed (apt-get install nodejs npm)"
    target = cache_dir()
    marker = target / "node_modules" / "oidc-provider" / "package.json"
    if not marker.exists():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(HERE / name, target / name)
        try:
            done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                                  cwd=target, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None, "npm ci timed out: the npm registry could not be reached"
        if done.returncode != 0 or not marker.exists():
            reason = (done.stderr or done.stdout).strip().splitlines()[-3:]
            network = any(w in " ".join(reason) for w in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED",
                                                          "ETIMEDOUT", "network"))
            if network:
                return None, "npm could not reach the registry: " + " | ".join(reason)
            raise RuntimeError("npm ci of tests/support/oidc failed: " + " | ".join(reason))
    shutil.copy2(HERE / "provider.mjs", target / "provider.mjs")
    return target, ""


class OidcProvider:
    def __init__(self, root: Path, *, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.issuer = ""
        self.log: list[str] = []

    async def start(self) -> OidcProvider:
        self.proc = await asyncio.create_subprocess_exec(
            shutil.which("node") or "node", "provider.mjs", cwd=self.root,
            env={**os.environ, "OIDC_PORT": "0", "OIDC_RESOURCE_SCOPES": RESOURCE_SCOPES, **self.env},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        except asyncio.TimeoutError:
            await self.stop()
            raise RuntimeError("the OpenID provider did not start in 30 s") from None
        if not line:
            err = await self.proc.stderr.read() if self.proc.stderr else b""
            raise RuntimeError(f"the OpenID provider exited: {err.decode()[-2000:]}")
        self.issuer = json.loads(line)["issuer"]
        return self

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()  # this process only, by its own handle
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def token(self, client: str, *, scope: str = "mcp", resource: str | None = RESOURCE) -> str:
        """An access token by the client credentials grant (the client's secret is `<id>-secret`)."""
        form = {"grant_type": "client_credentials", "scope": scope}
        if resource is not None:
            form["resource"] = resource
        basic = base64.b64encode(f"{client}:{client}-secret".encode()).decode()
        async with aiohttp.ClientSession() as s, s.post(
                f"{self.issuer}/token", data=form, headers={"Authorization": f"Basic {basic}"}) as r:
            body: dict[str, Any] = await r.json()
            assert r.status == 200, body
            return str(body["access_token"])

    async def _control(self, what: str) -> list[str]:
        async with aiohttp.ClientSession() as s, s.post(f"{self.issuer}/__test/{what}") as r:
            assert r.status == 200
            return list((await r.json())["kids"])

    async def grants(self, client: str) -> int:
        """Tokens the provider has issued to `client` so far."""
        async with aiohttp.ClientSession() as s, s.post(f"{self.issuer}/__test/grants") as r:
            assert r.status == 200
            return int((await r.json())["grants"].get(client, 0))

    async def rotate(self) -> list[str]:
        """New RS256 and ES256 signing keys; the old ones stay published."""
        return await self._control("rotate")

    async def retire(self) -> list[str]:
        """Only the newest pair of keys stays published."""
        return await self._control("retire")
