"""The identity layer's own outbound requests (discovery documents, key sets, the console's
token exchange): https only, except plain http to a loopback address (development, tests); no
redirects; bounded in size and time; and never to an address an attacker could use against the
network (cloud metadata, link-local, unspecified, multicast, reserved, IPv4-in-IPv6 forms).
Private and loopback addresses stay reachable: an organisation's provider often lives there.
The addresses are checked where the connection is made (a resolver that drops refused
answers), so a name that changes its answer between a check and the connect gains nothing."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from infra.netaddr import classify

# Kinds of address never fetched from (None, public, and these others are allowed).
REFUSED_KINDS = frozenset({"metadata", "unspecified", "multicast", "link_local", "ipv4_embedded",
                           "reserved"})
MAX_BYTES = 1 << 20
TIMEOUT_S = 5.0
USER_AGENT = "toolproxy-identity/1"


class FetchError(Exception):
    """Why an outbound request failed; `kind` is the metrics label."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def check_url(url: str) -> None:
    """https, or http to a loopback host; no credentials, no fragment. Raises ValueError."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (a malformed port raises)
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError(f"{url!r}: an https:// URL is needed")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ValueError(f"{url!r}: no credentials or fragment in the URL")
    literal = _literal(host)
    if literal is not None and classify(literal) in REFUSED_KINDS:
        raise ValueError(f"{url!r}: the address {literal} is never fetched from ({classify(literal)})")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ValueError(f"{url!r}: plain http is accepted on loopback only; use https")


def is_loopback_host(host: str) -> bool:
    literal = _literal(host)
    return host.lower() == "localhost" or (literal is not None and literal.is_loopback)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class GuardedResolver(AbstractResolver):
    """The system's answers, less the refused kinds of address (and only loopback ones for a
    name reached over plain http: `localhost`)."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        kept = [a for a in answers if classify(ipaddress.ip_address(a["host"])) not in REFUSED_KINDS]
        if not kept:
            raise OSError(f"{host} resolves only to addresses that are never fetched from")
        return kept

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    headers: dict[str, str]
    body: Any  # the parsed JSON document


class Outbound:
    """One HTTP client session for the identity layer (created on first use, in the loop)."""

    def __init__(self, *, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BYTES) -> None:
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(resolver=GuardedResolver(), limit=32, ttl_dns_cache=60)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": USER_AGENT},
                timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get_json(self, url: str) -> Fetched:
        return await self.request_json("GET", url)

    async def request_json(self, method: str, url: str, *, data: dict[str, str] | None = None,
                           headers: dict[str, str] | None = None, ok_statuses: tuple[int, ...] = (200,)
                           ) -> Fetched:
        try:
            check_url(url)
        except ValueError as exc:
            raise FetchError("refused_url", str(exc)) from None
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client().request(
                        method, url, data=data, allow_redirects=False,
                        headers={"Accept": "application/json", **(headers or {})}) as resp:
                    if 300 <= resp.status < 400:
                        raise FetchError("redirect", f"{url} answered a redirect ({resp.status}); "
                                                     "redirects are not followed")
                    if resp.content_length is not None and resp.content_length > self.max_bytes:
                        raise FetchError("too_large", f"{url} answered more than {self.max_bytes} bytes")
                    body = bytearray()
                    async for chunk in resp.content.iter_chunked(64 << 10):
                        body += chunk
                        if len(body) > self.max_bytes:
                            raise FetchError("too_large", f"{url} answered more than {self.max_bytes} bytes")
                    status, hdrs = resp.status, {k.lower(): v for k, v in resp.headers.items()}
        except FetchError:
            raise
        except (TimeoutError, asyncio.TimeoutError):
            raise FetchError("timeout", f"{url} did not answer within {self.timeout_s:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise FetchError("connect", f"{url}: {type(exc).__name__}: {str(exc)[:200]}") from None
        try:
            parsed: Any = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if status not in ok_statuses:
            detail = parsed.get("error") if isinstance(parsed, dict) else None
            said = f" ({detail[:100]})" if isinstance(detail, str) else ""
            raise FetchError("http_status", f"{url} answered {status}{said}")
        if not isinstance(parsed, dict):
            raise FetchError("malformed", f"{url} answered {status} with a body that is not a JSON object")
        return Fetched(status, hdrs, parsed)
