"""What the proxy's plugin relay and the plugin host agree on: which service (internal API) a
tool belongs to, and which values may travel on as an internal() call's arguments."""

from __future__ import annotations

from typing import Any

INT64 = (-(1 << 63), (1 << 63) - 1)


def service_of(tool_id: str) -> str:
    """The internal API (service) a tool belongs to: its first name segment (greenfood.order
    is the greenfood service's, data.query the data service's)."""
    return tool_id.split(".", 1)[0]


def unsafe_value(value: Any, depth: int = 0) -> str | None:
    """Why a JSON value may not travel on as tool arguments (NUL characters never reach
    Postgres; integers beyond 64 bits are refused, not stored), or None."""
    if depth > 64:
        return "nested too deeply"
    if isinstance(value, str):
        return "a NUL character" if "\x00" in value else None
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return None
    if isinstance(value, int):
        return None if INT64[0] <= value <= INT64[1] else "an integer beyond 64 bits"
    if isinstance(value, list):
        return next((p for p in (unsafe_value(v, depth + 1) for v in value) if p), None)
    if isinstance(value, dict):
        for k, v in value.items():
            problem = unsafe_value(k, depth + 1) or unsafe_value(v, depth + 1)
            if problem:
                return problem
        return None
    return "not JSON"
