"""Helpers of the console tests: the test server's own origin, logging in over HTTP, and
requests carrying a session the way the console's page sends them."""

from __future__ import annotations

from http.cookies import SimpleCookie
from typing import Any

from aiohttp.test_utils import TestClient


def host(client: TestClient) -> str:
    url = client.make_url("")
    return f"{url.host}:{url.port}"


def origin(client: TestClient) -> str:
    return f"http://{host(client)}"


class Console:
    """A logged-in console session: its cookie and CSRF token, sent explicitly (the test
    client's own cookie jar is emptied, so nothing is sent that a test does not say)."""

    def __init__(self, client: TestClient, cookie: str, csrf: str, body: dict[str, Any],
                 set_cookie: str) -> None:
        self.client = client
        self.cookie = cookie
        self.csrf = csrf
        self.body = body
        self.set_cookie = set_cookie

    def headers(self, *, csrf: bool = True, with_origin: bool = True, **extra: str) -> dict[str, str]:
        h = {"Cookie": self.cookie}
        if csrf:
            h["X-CSRF-Token"] = self.csrf
        if with_origin:
            h["Origin"] = origin(self.client)
        h.update(extra)
        return h

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, dict[str, Any]]:
        r = await self.client.post(path, json=body, headers=self.headers(**kw))
        return r.status, await r.json()

    async def get(self, path: str, **kw: Any) -> tuple[int, dict[str, Any]]:
        kw.setdefault("with_origin", False)  # browsers send no Origin on same-origin GETs
        r = await self.client.get(path, headers=self.headers(**kw))
        return r.status, await r.json()


async def login(client: TestClient, token: str, **headers: str) -> Console:
    r = await client.post("/console/session", json={"token": token},
                          headers={"Origin": origin(client), **headers})
    body = await r.json()
    assert r.status == 201, body
    set_cookie = r.headers["Set-Cookie"]
    jar = SimpleCookie()
    jar.load(set_cookie)
    (name, morsel), = jar.items()
    client.session.cookie_jar.clear()
    return Console(client, f"{name}={morsel.value}", body["csrf_token"], body, set_cookie)
