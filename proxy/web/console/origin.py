"""The Host and Origin a console request is held to: the Host exactly as its session was
opened on (the proxy's Host allowlist has already passed it), and for a mutation this
console's own Origin."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from proxy.web.keys import ORIGINS, SETTINGS
from proxy.web.console.errors import OriginRefused


def host_of(request: web.Request) -> str:
    """The Host header exactly as sent (lowercased: host names are case-insensitive)."""
    return request.headers.get("Host", "").strip().lower()


def check_origin(request: web.Request) -> None:
    """A mutation comes from a page of this very Host: `Origin` is `scheme://<Host>` exactly
    (https when the request came over TLS), in TOOLPROXY_ALLOWED_ORIGINS where that is set,
    and the browser's Sec-Fetch-Site, where it sends one, says same-origin. A missing or `null` Origin is refused: browsers send it on every
    cross-origin request and on every same-origin POST."""
    origin = request.headers.get("Origin")
    host = host_of(request)
    if not origin or not host:
        raise OriginRefused("this request needs an Origin and a Host header")
    parts = urlsplit(origin.strip().lower())
    schemes = ("https",) if request.secure else ("http", "https")
    if (parts.scheme not in schemes or parts.netloc != host or parts.path not in ("", "/")
            or parts.query or parts.fragment or parts.username is not None):
        raise OriginRefused("the Origin is not this console's own")
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        raise OriginRefused("the request did not come from this console's own pages")
    # The Host already passed the proxy's Host allowlist (TOOLPROXY_ALLOWED_HOSTS: 421
    # otherwise); where the operator lists the browser origins too, the Origin is one of them.
    if request.app[SETTINGS].allowed_origins is not None and not request.app[ORIGINS].allows(origin):
        raise OriginRefused("the Origin is not in TOOLPROXY_ALLOWED_ORIGINS")
