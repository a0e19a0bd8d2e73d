"""Host check: a request naming a host this proxy does not serve is misdirected (421), so a
DNS-rebound name never reaches the API. Probes answer whatever Host they come with."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.web.keys import HOSTS
from proxy.errors import MisdirectedRequest

PROBES = frozenset({"/healthz", "/readyz"})


@web.middleware
async def allowed_host(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path not in PROBES and not request.app[HOSTS].allows(request.headers.get("Host")):
        raise MisdirectedRequest("this server does not serve that Host")
    return await handler(request)
