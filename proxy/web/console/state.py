"""What the console owns in the app: its sessions, rate guard, inbox hub, static files and
the cache of unit-test runs of directory-served policy revisions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from infra.wakeups import TeamWakeups
from proxy.web.console.assets import Asset
from proxy.web.console.guard import RateGuard
from proxy.web.console.session import SessionStore


@dataclass
class Console:
    sessions: SessionStore
    guard: RateGuard
    hub: TeamWakeups  # wakes open inboxes when an approval of their team changes
    assets: dict[str, Asset]
    test_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    test_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
