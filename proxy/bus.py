"""The one NATS connection a process owns: reconnecting forever, logging state changes."""

from __future__ import annotations

import asyncio

import nats
import structlog
from nats.aio.client import Client as NATS

log = structlog.get_logger("toolproxy.nats")


async def connect(url: str, *, name: str) -> NATS:
    async def on_error(exc: Exception) -> None:
        log.warning("nats_error", error=str(exc) or type(exc).__name__)

    async def on_disconnect() -> None:
        log.warning("nats_disconnected")

    async def on_reconnect() -> None:
        log.info("nats_reconnected")

    return await nats.connect(
        url,
        name=name,
        connect_timeout=5,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
    )


async def close(nc: NATS, *, timeout: float = 5.0) -> None:
    """Drain (finish in-flight work) within `timeout`, then close regardless."""
    try:
        await asyncio.wait_for(nc.drain(), timeout)
    except Exception as exc:
        log.warning("nats_drain_incomplete", error=str(exc) or type(exc).__name__)
    if not nc.is_closed:
        await nc.close()
