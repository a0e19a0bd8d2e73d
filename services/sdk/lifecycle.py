"""A service with resources of its own (a poller, a KV bucket): opened before it serves,
closed after it stopped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS

from services.sdk.service import Service
from services.sdk.trust import CallTrust


@dataclass
class ResourcefulService(Service):
    opened: list[Callable[[NATS], Awaitable[None]]] = field(default_factory=list)
    closed: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def start(self, nc: NATS, trust: CallTrust | None = None) -> None:
        for open_ in self.opened:
            await open_(nc)
        await super().start(nc, trust)

    async def stop(self) -> None:
        await super().stop()
        for close in reversed(self.closed):
            await close()
