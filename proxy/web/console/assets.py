"""The console's static files, shipped in the package (no build step), read once at start and
served from memory with an ETag, under a Content-Security-Policy without 'unsafe-inline'."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from aiohttp import web

TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}

# Scripts and styles only from this origin (no inline code, no eval, no CDN); the page talks
# only to its own origin and cannot be framed.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-cache",  # revalidated each time (ETag): an upgrade shows at once
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


def load() -> dict[str, Asset]:
    root = resources.files("proxy.web.console") / "static"
    out: dict[str, Asset] = {}
    for entry in root.iterdir():
        suffix = entry.name[entry.name.rfind("."):]
        if entry.is_file() and suffix in TYPES:
            body = entry.read_bytes()
            out[entry.name] = Asset(body, TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
    if "index.html" not in out:
        raise FileNotFoundError("the console's static files are missing from the package")
    return out


def respond(request: web.Request, asset: Asset) -> web.Response:
    headers = {**HEADERS, "ETag": asset.etag}
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=asset.body, headers=headers, content_type=asset.content_type,
                        charset="utf-8")


def page_weight(assets: dict[str, Asset]) -> int:
    """Bytes of HTML, JS and CSS the console loads."""
    return sum(len(a.body) for a in assets.values() if a.content_type != "image/svg+xml")
