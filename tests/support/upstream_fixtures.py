"""The fixtures every upstream test module shares: the proxy's settings open to the module's
upstreams, and the bridge in-process. A module imports them and defines `up_settings`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.network_flow import roomy
from tests.support.upstreams import running_bridge


@pytest.fixture
def settings(settings, up_settings, monkeypatch):  # type: ignore[no-untyped-def]
    """The proxy's settings, allowing the hosts and commands the bridge may reach."""
    monkeypatch.setenv("TOOLPROXY_UPSTREAM_HOSTS", up_settings.upstream_hosts)
    monkeypatch.setenv("TOOLPROXY_UPSTREAM_COMMANDS", str(up_settings.upstream_commands))
    return roomy(settings)


@pytest.fixture
async def bridge(db_pool, nats_url, database_url, up_settings) -> AsyncIterator[Any]:  # type: ignore[no-untyped-def]
    """The upstream bridge on its own NATS user, for the test's length."""
    async with running_bridge(db_pool, nats_url, database_url, up_settings) as b:
        yield b
