"""What kind of address an IP is: public, or why not. Shared by the outbound guard of the
network tools (services/netguard/) and the identity provider fetches (proxy/identity/)."""

from __future__ import annotations

import ipaddress
from typing import Literal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Kind = Literal[
    "metadata", "loopback", "unspecified", "multicast", "link_local", "private", "cgnat",
    "ipv4_embedded", "reserved",
]

# Cloud instance metadata endpoints (AWS, GCP, Azure, OpenStack share the IPv4 one).
METADATA: frozenset[IPAddress] = frozenset(
    {ipaddress.IPv4Address("169.254.169.254"), ipaddress.IPv6Address("fd00:ec2::254")}
)
CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
# IPv6 ranges that carry an IPv4 address inside (mapped, compatible, NAT64, 6to4, Teredo):
# the packet may end up at that IPv4 address, so these are refused outright.
_EMBEDDING = (
    ipaddress.IPv6Network("::ffff:0:0/96"),
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("2002::/16"),
    ipaddress.IPv6Network("2001::/32"),
)

# What an allowlisted internal host (browser.lite) may resolve to. Never unspecified (0.0.0.0
# reaches this machine), multicast, reserved or IPv4-embedding forms; metadata only when the
# allowlist names that very address.
INTERNAL_KINDS: frozenset[Kind] = frozenset({"loopback", "private", "link_local", "cgnat"})


def classify(ip: IPAddress) -> Kind | None:
    """None for a public (globally routable, unicast) address, else the reason it is not."""
    if ip in METADATA:
        return "metadata"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_multicast:
        return "multicast"
    if ip.is_link_local:
        return "link_local"
    if isinstance(ip, ipaddress.IPv6Address) and any(ip in net for net in _EMBEDDING):
        return "ipv4_embedded"
    if isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT:
        return "cgnat"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return None
