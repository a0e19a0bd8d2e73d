"""Every log line of a call carries its call_id and decision_id (bound once, first)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from proxy.logs import configure_logging
from tests.conftest import invoke


@pytest.fixture
def captured() -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []

    def keep(logger: object, method: str, event: dict[str, Any]) -> dict[str, Any]:
        events.append(dict(event))
        raise structlog.DropEvent

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level, keep],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    try:
        yield events
    finally:
        configure_logging("warning", "console")


async def test_call_log_lines_carry_ids(client, token, team, captured) -> None:
    status, body = await invoke(client, token(team=team), "math", {"expr": "1/0"})
    assert status == 200
    mine = [e for e in captured if e.get("call_id") == body["call_id"]]
    events = {e["event"] for e in mine}
    assert "call_finished" in events
    for e in mine:
        assert e["decision_id"] == body["decision_id"]
        assert e["team_id"] == team and e["tool"] == "math"
    # The service's own log lines for this call carry the ids too (they travel in NATS headers).
    status, body = await invoke(client, token(team=team), "testsvc.slow", {"seconds": 2})
    assert status == 504
    service_lines = [e for e in captured if e.get("event") == "deadline_exceeded"]
    assert service_lines and service_lines[-1]["call_id"] == body["call_id"]
    assert service_lines[-1]["decision_id"] == body["decision_id"]
