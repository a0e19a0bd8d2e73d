"""A local website and a resolver for the network tools' tests: a real HTTP server on loopback
(pages, redirects, big and compressed bodies, an API that checks its credential) and a
resolver answering from a table (no real DNS in tests)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import ipaddress
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from services.netguard.errors import DnsFailed
from services.netguard.settings import NetOptions, NetSettings
from services.netguard.urls import IPAddress
from tests.support.loopback import serve

API_HEADER = "X-Api-Key"
TEST_SECRETS_KEY = base64.urlsafe_b64encode(b"k" * 32).decode()

HITS = web.AppKey("hits", Counter)
API_SECRETS = web.AppKey("api_secrets", set)

PAGE = b"""<!doctype html><html><head><title>  Local  test page </title>
<style>body{color:red}</style><script>document.write('never')</script></head>
<body><h1>Hello</h1><p>First <b>bold</b> paragraph.</p>
<a href="/plain">plain text</a> <a href="https://example.org/x#frag">elsewhere</a>
<a href="javascript:alert(1)">js</a> <a href="#top">anchor</a>
<noscript>no script text</noscript><div>Last<br>line</div></body></html>"""


class StaticResolver:
    """Answers from a table: name -> successive answers (the last one repeats); counts calls."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.calls: Counter[str] = Counter()

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        answers = self.table.get(host)
        if not answers:
            raise DnsFailed(host)
        n = self.calls[host]
        self.calls[host] += 1
        return [ipaddress.ip_address(a) for a in answers[min(n, len(answers) - 1)]]


def resolver_table() -> dict[str, list[list[str]]]:
    return {
        "site.test": [["127.0.0.1"]],  # browser.lite's allowlisted internal name
        "public.test": [["127.0.0.1"]],  # browser.full's (loopback through the test escape only)
        "other.test": [["127.0.0.1"]],  # on no allowlist
        "private.test": [["10.20.30.40"]],
        "mixed.test": [["127.0.0.1", "192.168.1.20"]],
        "meta.test": [["169.254.169.254"]],
        "mapped.test": [["::ffff:127.0.0.1"]],
        "cgnat.test": [["100.64.1.1"]],
        "zero.test": [["0.0.0.0"]],
    }


def _hit(request: web.Request) -> None:
    request.app[HITS][request.path_qs] += 1


async def page(request: web.Request) -> web.Response:
    _hit(request)
    return web.Response(body=PAGE, content_type="text/html", charset="utf-8")


async def plain(request: web.Request) -> web.Response:
    _hit(request)
    return web.Response(text="  just text\r\nline two  ", content_type="text/plain")


async def big(request: web.Request) -> web.StreamResponse:
    """About 3 MB of HTML, streamed: a reader that stops early never gets the rest."""
    resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
    await resp.prepare(request)
    await resp.write(b"<html><head><title>big</title></head><body><p>")
    try:
        for _ in range(3000):
            await resp.write(b"x" * 1000)
    except (ConnectionResetError, RuntimeError):
        return resp
    await resp.write_eof()
    return resp


async def bomb(request: web.Request) -> web.Response:
    """20 MB of zeros, gzip-compressed to about 20 KB."""
    body = gzip.compress(b"<html><body>" + b"0" * 20_000_000, compresslevel=9)
    return web.Response(body=body, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})


async def binary(request: web.Request) -> web.Response:
    _hit(request)
    return web.Response(body=b"\x00\x01", content_type="application/octet-stream")


async def redirect(request: web.Request) -> web.Response:
    _hit(request)
    raise web.HTTPFound(request.query.get("to", "/page"))


async def chain(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    raise web.HTTPFound("/page" if n == 0 else f"/chain/{n - 1}")


async def counted(request: web.Request) -> web.Response:
    _hit(request)
    return web.Response(text=f"<title>counted</title><p>{request.query.get('tag', '')}</p>",
                        content_type="text/html")


async def api(request: web.Request) -> web.Response:
    """A third-party API: 401 without the registered credential, else echoes the request."""
    _hit(request)
    if request.headers.get(API_HEADER) not in request.app[API_SECRETS]:
        return web.json_response({"error": "bad credential"}, status=401)
    body = await request.json() if request.can_read_body else None
    return web.json_response({"method": request.method, "path": request.path,
                              "query": request.query_string, "body": body})


async def api_headers(request: web.Request) -> web.Response:
    """Echoes every request header (as some real APIs do): the credential must not leak."""
    return web.json_response({"headers": dict(request.headers)})


def site_app() -> web.Application:
    app = web.Application()
    app[HITS] = Counter()
    app[API_SECRETS] = set()
    app.router.add_get("/page", page)
    app.router.add_get("/plain", plain)
    app.router.add_get("/big", big)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/binary", binary)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/chain/{n}", chain)
    app.router.add_get("/counted", counted)
    app.router.add_get("/api/headers", api_headers)
    app.router.add_route("*", "/api/{tail:.*}", api)
    return app


@dataclass
class Site:
    port: int
    app: web.Application
    secret_dir: Path
    resolver: StaticResolver = field(default_factory=lambda: StaticResolver(resolver_table()))

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def hits(self) -> Counter[str]:
        return self.app[HITS]

    def options(self, *, loopback_escape: bool = True, resolver: object = None) -> NetOptions:
        settings = NetSettings(
            data_dir=self.secret_dir.parent,
            browser_lite_hosts=f"127.0.0.1:{self.port},site.test:{self.port}",
            secrets_key=TEST_SECRETS_KEY,  # type: ignore[arg-type]
            external_api_secret_dir=self.secret_dir,
        )
        return NetOptions(settings=settings, resolver=resolver or self.resolver,  # type: ignore[arg-type]
                          unsafe_allow_loopback_for_tests=loopback_escape)


@contextlib.asynccontextmanager
async def serve_site(root: Path) -> AsyncIterator[Site]:
    app = site_app()
    runner, port = await serve(app)
    secret_dir = root / "secrets" / "external_apis"
    secret_dir.mkdir(parents=True)
    try:
        yield Site(port=port, app=app, secret_dir=secret_dir)
    finally:
        await asyncio.wait_for(runner.cleanup(), 5)
