"""Strict parsing of an outbound URL: http(s) only, no userinfo, IDNA host, canonical IP forms.

Anything a browser, libc or a proxy could read differently from us is refused instead of
normalized: control characters, spaces and backslashes, percent-encoded hosts, IPv6 zone ids and
the legacy numeric IPv4 forms (`0x7f.1`, `2130706433`, `017700000001`, `127.1`) that
`inet_aton` would still map onto an address.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit

import idna

from services.netguard.errors import InvalidUrl, UrlNotAllowed

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?", re.ASCII)
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
# Characters kept as they are in a path or query (RFC 3986 pchar plus "/" and "?", and "%" of
# existing escapes); anything else, non-ASCII included, is percent-encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True, slots=True)
class Target:
    """A URL we may try to reach: its parts canonical, its host ASCII and lowercase."""

    scheme: str
    host: str  # IDNA A-label form, or an IP address without brackets
    port: int
    path: str  # starts with "/", ASCII
    query: str  # without "?", ASCII
    ip: IPAddress | None  # set when the host is an IP literal

    @property
    def host_in_url(self) -> str:
        return f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host

    @property
    def default_port(self) -> bool:
        return DEFAULT_PORTS[self.scheme] == self.port

    @property
    def origin(self) -> str:
        port = "" if self.default_port else f":{self.port}"
        return f"{self.scheme}://{self.host_in_url}{port}"

    @property
    def url(self) -> str:
        return self.origin + self.path + (f"?{self.query}" if self.query else "")


def parse_url(raw: str, *, base: Target | None = None) -> Target:
    """Parse `raw` (resolved against `base` for a redirect's Location) or raise InvalidUrl
    (unreadable) or UrlNotAllowed (readable, refused)."""
    if not isinstance(raw, str) or not raw or len(raw) > MAX_URL_LENGTH:
        raise InvalidUrl(f"a URL is 1 to {MAX_URL_LENGTH} characters")
    if any(c <= " " or c == "\x7f" or c == "\\" for c in raw):
        raise InvalidUrl("a URL may not contain spaces, control characters or backslashes")
    if base is not None:
        raw = urljoin(base.url, raw)
        if len(raw) > MAX_URL_LENGTH:
            raise InvalidUrl(f"a URL is at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(raw)
    except ValueError as exc:
        raise InvalidUrl(f"not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UrlNotAllowed("only http and https URLs may be fetched")
    netloc = parts.netloc
    if "@" in netloc:
        raise UrlNotAllowed("URLs with user information (user@host) are refused")
    host, ip, port_text = _split_netloc(netloc)
    if port_text is None or port_text == "":
        port = DEFAULT_PORTS[scheme]
    elif _PORT.fullmatch(port_text) and 0 < int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise InvalidUrl("the port must be a number from 1 to 65535")
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    if not path.startswith("/"):
        raise InvalidUrl("the path must start with /")
    query = quote(parts.query, safe=_QUERY_SAFE)
    return Target(scheme=scheme, host=host, port=port, path=path, query=query, ip=ip)


def _split_netloc(netloc: str) -> tuple[str, IPAddress | None, str | None]:
    if not netloc:
        raise InvalidUrl("the URL has no host")
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            raise InvalidUrl("unterminated IPv6 address")
        literal, rest = netloc[1:end], netloc[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidUrl("unexpected characters after the IPv6 address")
        if "%" in literal:
            raise UrlNotAllowed("IPv6 zone identifiers are refused")
        try:
            ip6 = ipaddress.IPv6Address(literal)
        except ValueError:
            raise InvalidUrl("not an IPv6 address") from None
        return str(ip6), ip6, rest[1:] if rest else None
    host, sep, port = netloc.rpartition(":")
    if not sep:
        host, port = netloc, None
    host, ip = canonical_host(host)
    return host, ip, port


def canonical_host(host: str) -> tuple[str, IPAddress | None]:
    """The host's ASCII form (IDNA 2008 with UTS 46 mapping, lowercase, no trailing dot) and
    its address when it is an IPv4 literal. Raises for what DNS or libc could misread."""
    if not host or len(host) > MAX_HOST_LENGTH + 1:
        raise InvalidUrl("the host is empty or too long")
    if "%" in host or "[" in host or "]" in host:
        raise InvalidUrl("percent-encoded or bracketed characters in a host name")
    try:
        # UTS 46 maps look-alikes first (full-width digits and dots become ASCII), so the
        # numeric check below sees what a resolver would see.
        ascii_host = idna.encode(host, uts46=True).decode("ascii").lower()
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        raise InvalidUrl(f"not a valid host name: {exc}") from None
    ascii_host = ascii_host.removesuffix(".")
    if not ascii_host or len(ascii_host) > MAX_HOST_LENGTH:
        raise InvalidUrl("the host is empty or too long")
    labels = ascii_host.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # WHATWG: a host ending in a number is an IPv4 address; only the dotted-decimal form
        # with four parts and no leading zeros is accepted.
        try:
            ip4 = ipaddress.IPv4Address(ascii_host)
        except ValueError:
            raise UrlNotAllowed(
                f"{host!r} is a non-canonical numeric address (use a dotted-decimal IPv4 address)"
            ) from None
        if str(ip4) != ascii_host:
            raise UrlNotAllowed(f"{host!r} is a non-canonical numeric address")
        return ascii_host, ip4
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidUrl(f"not a valid host name: {host!r}")
    return ascii_host, None
