"""HTTP through the guard: every hop admitted first, connected only to its checked addresses,
the body read up to a bound (decompression included) and then dropped."""

from __future__ import annotations

import asyncio
import codecs
import contextvars
import ipaddress
import socket
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from services.netguard.errors import (
    BadResponse,
    TooManyRedirects,
    UnsupportedContent,
    UpstreamUnreachable,
)
from services.netguard.guard import Destination, Guard
from services.netguard.hosts import HostPattern
from services.netguard.urls import Target, parse_url
from services.sdk.errors import UpstreamTimeout

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
CHUNK = 64 << 10

# The destination the current task is about to connect to: the connector's resolver answers
# with its checked addresses and nothing else, so the HTTP client never resolves a name itself
# (a DNS answer that changes between our check and the connection cannot be used).
_PIN: contextvars.ContextVar[Destination | None] = contextvars.ContextVar("netguard_pin", default=None)


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver slot, answering only with the guard's checked addresses."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        dest = _PIN.get()
        if dest is None or dest.target.host != host:
            raise OSError(f"{host} was not checked by the guard")
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if isinstance(ip, ipaddress.IPv6Address) else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in dest.addresses
        ]

    async def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Response:
    target: Target  # after redirects
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool

    def text(self) -> str:
        """The body as text: the declared charset when Python knows it, else UTF-8; bytes that
        do not decode (a multi-byte character cut by the size bound) become U+FFFD."""
        name = "utf-8"
        if self.charset:
            try:
                name = codecs.lookup(self.charset).name
            except LookupError:
                pass
        return self.body.decode(name, errors="replace")


class Fetcher:
    """One HTTP session per tool (created in the running loop on first use, closed by the
    service's stop): no cookies kept, no proxy from the environment, no client-side DNS."""

    def __init__(self, guard: Guard, *, user_agent: str) -> None:
        self.guard = guard
        self.user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=PinnedResolver(), use_dns_cache=False, family=socket.AF_UNSPEC,
                limit=64, limit_per_host=8,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # calls of different teams share nothing
                auto_decompress=False,  # decompressed here, within the bound
                trust_env=False,
                # Only what _bounded_body can inflate within its bound (aiohttp would also
                # offer br and zstd when their packages are installed).
                headers={"User-Agent": self.user_agent, "Accept-Encoding": "gzip, deflate"},
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(
        self,
        target: Target,
        allowlist: Sequence[HostPattern],
        *,
        internal_ok: bool,
        max_bytes: int,
        timeout_s: float,
        accept: frozenset[str] | None,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
        follow_redirects: bool = True,
        data: bytes | None = None,
    ) -> Response:
        """Admit, connect, read. Redirects (at most 5) are admitted again, hop by hop."""
        try:
            async with asyncio.timeout(timeout_s):
                for hop in range(MAX_REDIRECTS + 1):
                    dest = await self.guard.admit(target, allowlist, internal_ok=internal_ok)
                    token = _PIN.set(dest)
                    try:
                        response = await self._send(dest, method, headers, json_body, data)
                    finally:
                        _PIN.reset(token)
                    async with response:
                        location = response.headers.get("Location")
                        if follow_redirects and response.status in REDIRECTS and location:
                            if hop == MAX_REDIRECTS:
                                raise TooManyRedirects(MAX_REDIRECTS)
                            target = parse_url(location, base=target)
                            if response.status == 303 or method != "GET":
                                method, json_body, data = "GET", None, None
                            continue
                        return await _read(response, target, max_bytes, accept)
        except TimeoutError:
            raise UpstreamTimeout(f"no complete answer within {timeout_s:.1f}s") from None
        raise AssertionError("unreachable")

    async def _send(
        self, dest: Destination, method: str, headers: Mapping[str, str] | None, json_body: Any,
        data: bytes | None = None,
    ) -> aiohttp.ClientResponse:
        url = URL(dest.target.url, encoded=True)
        try:
            return await self._client().request(
                method, url, headers=dict(headers or {}), json=json_body, data=data,
                allow_redirects=False, max_redirects=0,
            )
        except aiohttp.ClientSSLError:
            raise UpstreamUnreachable(f"TLS with {dest.target.host} failed") from None
        except (aiohttp.ClientConnectionError, OSError) as exc:
            raise UpstreamUnreachable(f"cannot connect to {dest.target.host}: {type(exc).__name__}") from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(f"bad answer from {dest.target.host}: {type(exc).__name__}") from None


async def _read(
    response: aiohttp.ClientResponse, target: Target, max_bytes: int, accept: frozenset[str] | None
) -> Response:
    content_type = response.content_type.lower()
    if accept is not None and content_type not in accept:
        raise UnsupportedContent(
            f"the answer is {content_type}; only {', '.join(sorted(accept))} are read"
        )
    body, truncated = await _bounded_body(response, max_bytes)
    return Response(target=target, status=response.status, content_type=content_type,
                    charset=response.charset, body=body, truncated=truncated)


async def _bounded_body(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        decoder = None
    elif encoding in ("gzip", "x-gzip", "deflate"):
        decoder = zlib.decompressobj(wbits=47)  # zlib or gzip header, detected
    else:
        raise UnsupportedContent(f"content encoding {encoding[:40]!r} is not read")
    out = bytearray()
    raw_limit = 4 * max_bytes + CHUNK  # compressed input that yields nothing stops too
    raw = 0
    try:
        async for chunk in response.content.iter_chunked(CHUNK):
            raw += len(chunk)
            if decoder is None:
                out += chunk
            else:
                out += decoder.decompress(chunk, max_bytes + 1 - len(out))
                if decoder.unconsumed_tail:
                    return bytes(out[:max_bytes]), True
            if len(out) > max_bytes or raw > raw_limit:
                return bytes(out[:max_bytes]), True
    except zlib.error:
        raise BadResponse("the answer's compressed body is corrupt") from None
    except aiohttp.ClientPayloadError:
        raise BadResponse("the answer's body was cut short or malformed") from None
    return bytes(out), False
