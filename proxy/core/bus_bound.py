"""Whether a call fits on the bus: NATS refuses a message above its max_payload (a clear 413
before anything runs, never an unhandled error at the publish)."""

from __future__ import annotations

from typing import Any

import orjson
from nats.aio.client import Client as NATS

from proxy.core.errors import CallTooLargeForBus
from wire.bounds import BUS_ENVELOPE_BYTES


def check_fits(nc: NATS, args: dict[str, Any], body_bytes: int | None = None) -> None:
    """Raises CallTooLargeForBus when `args` and their envelope exceed the server's
    max_payload. `body_bytes` (the request's size, at least the arguments' compact JSON in
    practice) spares encoding the arguments unless the call is near the bound."""
    limit = nc.max_payload  # from the server's INFO; 0 until connected
    if not limit:
        return
    if body_bytes is not None and body_bytes + BUS_ENVELOPE_BYTES <= limit:
        return
    size = len(orjson.dumps(args))
    if size + BUS_ENVELOPE_BYTES > limit:
        raise CallTooLargeForBus(
            f"the call's arguments ({size} bytes) with their envelope exceed what the message bus "
            f"carries ({limit} bytes, its max_payload)")
