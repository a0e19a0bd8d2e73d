"""Typed keys for the resources only the native API reaches (set by the app factory)."""

from __future__ import annotations

from aiohttp import web

from infra.wakeups import TeamWakeups
from proxy.turns.runtime import TurnRuntime

EVENT_WAKEUPS = web.AppKey("event_wakeups", TeamWakeups)  # wakes /v1/events/stream readers
TURNS = web.AppKey("turns", TurnRuntime)
