"""The outbound-address guard every network tool goes through: strict URLs, checked and pinned
addresses, bounded responses."""

from infra.netaddr import classify
from services.netguard.fetch import Fetcher, Response
from services.netguard.guard import Destination, Guard
from services.netguard.hosts import HostPattern, parse_patterns
from services.netguard.resolver import Resolver, SystemResolver
from services.netguard.urls import Target, parse_url

__all__ = [
    "Destination",
    "Fetcher",
    "Guard",
    "HostPattern",
    "Resolver",
    "Response",
    "SystemResolver",
    "Target",
    "classify",
    "parse_patterns",
    "parse_url",
]
