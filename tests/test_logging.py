"""Every log line of a call carries its call_id and decision_id (bound once, first)."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from infra.logs import configure_logging
from infra import log_context
from tests.support.calls import invoke


@pytest.fixture
def captured() -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    saved = structlog.get_config()

    def keep(logger: object, method: str, event: dict[str, Any]) -> dict[str, Any]:
        events.append(dict(event))
        raise structlog.DropEvent

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, log_context.merge, structlog.processors.add_log_level, keep],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    try:
        yield events
    finally:
        # Restored exactly: configure_logging() here would cache every logger used afterwards
        # under its processors, and a later test capturing log lines would capture none.
        structlog.configure(**saved)


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


def test_the_log_configuration_merges_the_bound_context(capsys) -> None:
    """configure_logging's lines carry what log_context bound: a request's keys, a block's keys
    for that block only, the line's own keys over both; a task started inside a block sees it,
    a binding inside a task stays in the task. structlog's own bound keys are merged too."""
    saved = structlog.get_config()
    configure_logging("info", "json")
    log = structlog.get_logger("toolproxy.test")

    async def in_a_task() -> None:
        log.info("task_sees")
        log_context.add(task_only="yes")

    async def scenario() -> None:
        log_context.start(request_id="r1")
        log_context.add(team_id="t1")
        structlog.contextvars.bind_contextvars(legacy="kept")
        with log_context.bound(call_id="c1", team_id="t2"):
            log.info("inside")
            log.info("explicit", call_id="given")
            await asyncio.create_task(in_a_task())
            log.info("after_task")
        log.info("outside")

    try:
        contextvars.copy_context().run(asyncio.run, scenario())
    finally:
        structlog.configure(**saved)
    lines = {d["event"]: d for d in map(json.loads, capsys.readouterr().err.splitlines())}
    assert lines["inside"]["request_id"] == "r1" and lines["inside"]["call_id"] == "c1"
    assert lines["inside"]["team_id"] == "t2" and lines["inside"]["legacy"] == "kept"
    assert lines["explicit"]["call_id"] == "given"
    assert lines["task_sees"]["call_id"] == "c1"
    assert "task_only" not in lines["after_task"]
    assert "call_id" not in lines["outside"] and lines["outside"]["team_id"] == "t1"
    assert log_context.current() == {}  # nothing leaked out of the scenario's context
