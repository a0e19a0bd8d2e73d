"""A raw NATS subscriber on tools.> : proves what was (not) published to services."""

from __future__ import annotations

import asyncio


class BusSpy:
    """A raw NATS subscriber on tools.> : proves what was (not) published to services."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def settle(self, nc: object) -> None:
        await nc.flush()  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
