"""Host allowlist patterns: `host[:port]`, where host is a name, `*.domain` or an IP literal."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.netguard.urls import IPAddress, Target, canonical_host
from services.sdk import ToolError

MAX_PATTERN_LENGTH = 260
MAX_PATTERNS = 200


class PatternError(ValueError):
    """A pattern that cannot be parsed (the message says why)."""


@dataclass(frozen=True, slots=True)
class HostPattern:
    """`example.com` (that host), `*.example.com` (any host below it, not itself),
    `10.0.0.5`, `[fd00::1]`; `:8080` one port, `:*` any port, no port: the scheme's default."""

    host: str  # canonical; for a wildcard, the domain after "*."
    wildcard: bool
    port: int | None  # None: the scheme's default port
    any_port: bool
    ip: IPAddress | None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        if not isinstance(text, str) or not text or len(text) > MAX_PATTERN_LENGTH:
            raise PatternError(f"a host pattern is 1 to {MAX_PATTERN_LENGTH} characters")
        if any(c <= " " or c in "/\\@?#%" for c in text):
            raise PatternError(f"{text!r}: a host pattern is host[:port], nothing else")
        host_part, port, any_port = _split_port(text)
        wildcard = host_part.startswith("*.")
        if wildcard:
            host_part = host_part[2:]
        if "*" in host_part:
            raise PatternError(f"{text!r}: '*' only as the first label ('*.example.com')")
        ip: IPAddress | None
        try:
            if host_part.startswith("["):
                if not host_part.endswith("]"):
                    raise PatternError(f"{text!r}: unterminated IPv6 address")
                ip = ipaddress.IPv6Address(host_part[1:-1])
                host = str(ip)
            else:
                host, ip = canonical_host(host_part)
        except (ValueError, ToolError) as exc:
            raise PatternError(f"{text!r}: {getattr(exc, 'message', exc)}") from None
        if wildcard and (ip is not None or "." not in host):
            raise PatternError(f"{text!r}: a wildcard needs a domain of two labels or more")
        return cls(host=host, wildcard=wildcard, port=port, any_port=any_port, ip=ip)

    def matches(self, target: Target) -> bool:
        if self.any_port:
            pass
        elif self.port is None:
            if not target.default_port:
                return False
        elif self.port != target.port:
            return False
        if self.ip is not None or target.ip is not None:
            return self.ip is not None and self.ip == target.ip
        if self.wildcard:
            return target.host.endswith("." + self.host)
        return target.host == self.host

    def names_address(self, ip: IPAddress) -> bool:
        """True when the pattern is this exact IP literal (what lets browser.lite reach a
        metadata address: never through a name or a wildcard)."""
        return self.ip is not None and self.ip == ip

    def __str__(self) -> str:
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        host = f"*.{host}" if self.wildcard else host
        if self.any_port:
            return f"{host}:*"
        return host if self.port is None else f"{host}:{self.port}"


def _split_port(text: str) -> tuple[str, int | None, bool]:
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[: end + 1], text[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise PatternError(f"{text!r}: bad IPv6 literal")
        port_text = rest[1:] if rest else None
    else:
        host, sep, port_text_ = text.rpartition(":")
        if not sep:
            host, port_text = text, None
        else:
            port_text = port_text_
    if port_text is None:
        return host, None, False
    if port_text == "*":
        return host, None, True
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise PatternError(f"{text!r}: the port is 1 to 65535 or *")
    return host, int(port_text), False


def parse_patterns(items: Iterable[str]) -> list[HostPattern]:
    out = [HostPattern.parse(item.strip()) for item in items if item.strip()]
    if len(out) > MAX_PATTERNS:
        raise PatternError(f"at most {MAX_PATTERNS} host patterns")
    return out


def first_match(patterns: Sequence[HostPattern], target: Target) -> HostPattern | None:
    return next((p for p in patterns if p.matches(target)), None)
