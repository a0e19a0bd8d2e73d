"""The guard: may this target be reached, and at which checked addresses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from infra.netaddr import INTERNAL_KINDS, classify
from services.netguard.errors import UrlNotAllowed
from services.netguard.hosts import HostPattern, first_match
from services.netguard.resolver import Resolver
from services.netguard.urls import IPAddress, Target

log = structlog.get_logger("toolproxy.netguard")


@dataclass(frozen=True, slots=True)
class Destination:
    """A target whose every address was checked: the only addresses it may be connected to."""

    target: Target
    addresses: tuple[IPAddress, ...]


class Guard:
    """Checks a target against an allowlist and every address its host resolves to.

    `internal_ok` (browser.lite) lets allowlisted hosts be loopback, private, link-local or
    CGNAT. `unsafe_allow_loopback_for_tests` lets loopback through for tools that otherwise
    reach only public addresses: a constructor argument of the service, never read from the
    environment, governance data or a call, so the test suite can reach its local servers.
    """

    def __init__(self, resolver: Resolver, *, unsafe_allow_loopback_for_tests: bool = False) -> None:
        self.resolver = resolver
        self._test_loopback = unsafe_allow_loopback_for_tests

    async def admit(
        self, target: Target, allowlist: Sequence[HostPattern], *, internal_ok: bool
    ) -> Destination:
        pattern = first_match(allowlist, target)
        if pattern is None:
            raise UrlNotAllowed(f"{_where(target)} is not in the allowlist")
        if target.ip is not None:
            addresses = [target.ip]
        else:
            addresses = await self.resolver.resolve(target.host, target.port)
        for ip in addresses:
            kind = self._refusal(ip, pattern, internal_ok)
            if kind is not None:
                log.info("address_refused", host=target.host, address=str(ip), kind=kind)
                raise UrlNotAllowed(f"{target.host} resolves to a {kind.replace('_', '-')} address")
        return Destination(target=target, addresses=tuple(addresses))

    def _refusal(self, ip: IPAddress, pattern: HostPattern, internal_ok: bool) -> str | None:
        kind = classify(ip)
        if kind is None:
            return None
        if internal_ok and (kind in INTERNAL_KINDS or (kind == "metadata" and pattern.names_address(ip))):
            return None
        if kind == "loopback" and self._test_loopback:
            return None
        return kind


def _where(target: Target) -> str:
    return target.host_in_url if target.default_port else f"{target.host_in_url}:{target.port}"
