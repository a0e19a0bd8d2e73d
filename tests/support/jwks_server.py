"""A key set endpoint on loopback whose behaviour a test chooses (serving, down, slow,
redirecting, 5 MB, malformed), with keys of its own to sign tokens: for the failure modes a
real provider cannot be made to show. It counts every request."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER_PATH = "/realms/test"


class KeySetServer:
    def __init__(self) -> None:
        self.mode = "ok"
        self.cache_control: str | None = None
        self.requests = 0
        self.delay_s = 10.0
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.kids = {"RS256": f"rs-{uuid.uuid4().hex[:8]}", "ES256": f"es-{uuid.uuid4().hex[:8]}",
                     "PS256": f"ps-{uuid.uuid4().hex[:8]}", "EdDSA": f"ed-{uuid.uuid4().hex[:8]}"}
        self.url = ""
        self._runner: web.AppRunner | None = None

    @property
    def issuer(self) -> str:
        return self.url + ISSUER_PATH

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    def jwks(self) -> dict[str, Any]:
        rs = RSAAlgorithm.to_jwk(self.rsa.public_key(), as_dict=True)
        es = ECAlgorithm.to_jwk(self.ec.public_key(), as_dict=True)
        ed = OKPAlgorithm.to_jwk(self.ed.public_key(), as_dict=True)
        return {"keys": [{**rs, "kid": self.kids["RS256"], "use": "sig", "alg": "RS256"},
                         {**es, "kid": self.kids["ES256"], "use": "sig", "alg": "ES256"},
                         {**rs, "kid": self.kids["PS256"], "use": "sig", "alg": "PS256"},
                         {**ed, "kid": self.kids["EdDSA"], "use": "sig", "alg": "EdDSA"}]}

    def rotate(self) -> None:
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.kids["ES256"] = f"es-{uuid.uuid4().hex[:8]}"

    def token(self, alg: str = "ES256", *, headers: dict[str, Any] | None = None, key: Any = None,
              **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {"iss": self.issuer, "aud": "https://toolproxy.test", "sub": "svc-1",
                                "team": "t-fake", "role": "agent", "iat": now, "exp": now + 600,
                                "scope": "mcp"}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        signer = key if key is not None else (
            self.rsa if alg.startswith(("RS", "PS")) else self.ed if alg == "EdDSA" else self.ec)
        return jwt.encode(body, signer, algorithm=alg, headers={"kid": self.kids.get(alg, "x"), **(headers or {})})

    async def _jwks(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.mode == "slow":
            await asyncio.sleep(self.delay_s)
        if self.mode == "redirect":
            raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")
        if self.mode == "huge":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            chunk = b" " * (1 << 16)
            for _ in range(80):  # 5 MB of whitespace before any JSON
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        if self.mode == "malformed":
            return web.Response(body=b'{"keys": [', content_type="application/json")
        if self.mode == "error":
            return web.json_response({"error": "unavailable"}, status=503)
        headers = {"Cache-Control": self.cache_control} if self.cache_control else None
        return web.json_response(self.jwks(), headers=headers)

    async def _discovery(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response({"issuer": self.issuer, "jwks_uri": self.jwks_url})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/jwks", self._jwks)
        app.router.add_get(ISSUER_PATH + "/.well-known/openid-configuration", self._discovery)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@asynccontextmanager
async def key_set_server() -> AsyncIterator[KeySetServer]:
    server = KeySetServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
