"""DNS resolution done by the guard itself (never by the HTTP client): the system resolver,
or any object with the same `resolve` (tests pass their own; no real DNS there)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Protocol

from services.netguard.errors import DnsFailed
from services.netguard.urls import IPAddress

MAX_ADDRESSES = 16


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address `host` resolves to (raises DnsFailed when none)."""
        ...


class SystemResolver:
    """getaddrinfo in the loop's executor, bounded in time and in the number of answers."""

    def __init__(self, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout_s):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, UnicodeError):
            raise DnsFailed(host) from None
        seen: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            text = str(sockaddr[0]).split("%", 1)[0]  # a scoped address keeps its scope apart
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                continue
            if ip not in seen:
                seen.append(ip)
        if not seen:
            raise DnsFailed(host)
        return seen[:MAX_ADDRESSES]
