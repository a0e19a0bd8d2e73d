"""Allowlists of Host values (DNS rebinding, misdirected requests) and of browser Origins."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))*", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
_WILDCARD = ("", "0.0.0.0", "::", "[::]")
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_SEEN_MAX = 1024  # Host values remembered (most clients send one or two)


def split_host(value: str) -> tuple[str, int | None] | None:
    """(name, port) of a Host value, names lowercased and IPv6 without brackets; None when
    it is not a well-formed host[:port]."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, sep, rest = value.partition(":")
        rest = sep + rest
        name = name.rstrip(".")
        if not (_NAME.fullmatch(name) and len(name) <= 253):
            return None
    if not rest:
        return name, None
    if rest[0] != ":" or not _PORT.fullmatch(rest[1:]) or int(rest[1:]) > 65535:
        return None
    return name, int(rest[1:])


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostAllowlist:
    """Entries: a name or IP (any port), name:port (that port), or an IP network (any IP in it)."""

    any_host: bool = False
    names: frozenset[str] = frozenset()
    pairs: frozenset[tuple[str, int]] = frozenset()
    networks: tuple[IpNetwork, ...] = field(default=())
    seen: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> HostAllowlist:
        entries = [e.strip() for e in text.split(",") if e.strip()]
        if "*" in entries:
            return cls(any_host=True)
        names: set[str] = set()
        pairs: set[tuple[str, int]] = set()
        networks: list[IpNetwork] = []
        for entry in entries:
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"allowed host {entry!r} is not an IP network") from None
                continue
            bare = entry if entry.startswith("[") or entry.count(":") <= 1 else f"[{entry}]"
            parsed = split_host(bare)
            if parsed is None:
                raise ValueError(f"allowed host {entry!r} is not host[:port]")
            name, port = parsed
            if port is None:
                names.add(name)
            else:
                pairs.add((name, port))
        return cls(names=frozenset(names), pairs=frozenset(pairs), networks=tuple(networks))

    @classmethod
    def default(cls, listen_host: str) -> HostAllowlist:
        """What the proxy listens on, plus localhost, any port; listening on every address,
        any IP literal (no DNS name can rebind to an IP-literal Host) and localhost."""
        if listen_host.strip() in _WILDCARD:
            return cls.parse("localhost,0.0.0.0/0,::/0")
        host = listen_host.strip()
        return cls.parse(f"{host},localhost")

    def allows(self, value: str | None) -> bool:
        if self.any_host:
            return True
        if not value:
            return False
        known = self.seen.get(value)
        if known is None:
            known = self._allows(value)
            if len(self.seen) < _SEEN_MAX:  # full: still answered, just not remembered
                self.seen[value] = known
        return known

    def _allows(self, value: str) -> bool:
        parsed = split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        if name in self.names or (port is not None and (name, port) in self.pairs):
            return True
        if self.networks:
            ip = _ip(name)
            return ip is not None and any(ip in net for net in self.networks)
        return False


@dataclass(frozen=True, slots=True)
class OriginAllowlist:
    """Exact origins ("scheme://host[:port]", case-insensitive) or "*" for any."""

    any_origin: bool = False
    origins: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> OriginAllowlist:
        entries = [e.strip().lower().rstrip("/") for e in text.split(",") if e.strip()]
        if "*" in entries:
            return cls(any_origin=True)
        return cls(origins=frozenset(entries))

    @classmethod
    def default(cls, listen_host: str, port: int) -> OriginAllowlist:
        """The proxy's own origins (a page it serves calling it): localhost and the listen
        address, at its port."""
        hosts = ["localhost", "127.0.0.1", "[::1]"]
        host = listen_host.strip().lower()
        if host not in _WILDCARD and host not in hosts:
            hosts.append(f"[{host}]" if ":" in host and not host.startswith("[") else host)
        return cls.parse(",".join(f"{scheme}://{h}:{port}" for h in hosts for scheme in ("http", "https")))

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin.strip().lower().rstrip("/") in self.origins
