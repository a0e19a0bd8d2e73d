"""Which addresses an upstream may be reached at: every address of its URL's host checked by
netguard, a non-public one only where TOOLPROXY_UPSTREAM_HOSTS names it (the proxy checks at
registration, the bridge before every connection and request)."""

from __future__ import annotations

from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern, first_match
from services.netguard.urls import Target, parse_url


async def check_url(guard: Guard, url: str, allowed: list[HostPattern]) -> None:
    """Raises netguard's UrlNotAllowed unless every address of the URL's host may be used."""
    target = parse_url(url)
    patterns, internal_ok = _admission(target, allowed)
    await guard.admit(target, patterns, internal_ok=internal_ok)


def admission(url: str, allowed: list[HostPattern]) -> tuple[list[HostPattern], bool]:
    """The allowlist and internal_ok netguard admits `url` with: an operator's pattern
    (TOOLPROXY_UPSTREAM_HOSTS) may name a non-public address; anything else must be public."""
    return _admission(parse_url(url), allowed)


def _admission(target: Target, allowed: list[HostPattern]) -> tuple[list[HostPattern], bool]:
    pattern = first_match(allowed, target)
    if pattern is not None:
        return [pattern], True
    return [HostPattern(host=target.host, wildcard=False, port=target.port, any_port=False,
                        ip=target.ip)], False
