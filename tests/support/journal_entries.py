"""Journal entries for tests: a call's start (RUNNING row, first events) and its end (usage,
COMPLETED row, every event), as the pipeline records them."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

from proxy.records.calls import CallRecord
from proxy.records.entry import Entry
from proxy.records.events import event
from proxy.records.usage import UsageRecord


def call_start(call_id: str, team: str, t: datetime) -> Entry:
    row = CallRecord(call_id=call_id, team_id=team, agent_id="a", agent_run_id="r", tool="math",
                     status="RUNNING", owner="proxy-x", decision_id=str(uuid.uuid4()),
                     created_at=t, started_at=t, deadline_at=t + timedelta(seconds=2))
    evs = [event(team, "agent.tool.requested", call_id=call_id),
           event(team, "agent.tool.started", call_id=call_id)]
    return Entry(call=row, events=evs, key=f"{call_id}:start")


def ended(start: Entry, t: datetime) -> Entry:
    assert start.call is not None
    c = start.call
    result_id = str(uuid.uuid4())
    row = dataclasses.replace(c, status="COMPLETED", result_id=result_id, http_status=200,
                              response={"ok": True, "output": {"value": 1}},
                              started_at=None, deadline_at=None, finished_at=t, latency_ms=1.0)
    usage = UsageRecord(call_id=c.call_id, result_id=result_id, decision_id=c.decision_id,
                        team_id=c.team_id, agent_id="a", agent_run_id="r", tool="math",
                        category="A", action="read", decision="allow", status="COMPLETED",
                        error_code=None, http_status=200, latency_ms=1.0, started_at=c.created_at,
                        finished_at=t)
    return Entry(usage=usage, call=row, events=[*start.events, event(c.team_id, "agent.tool.completed",
                                                                     call_id=c.call_id)],
                 key=c.call_id)


def call_end(team: str) -> Entry:
    """A whole call's end record (a fresh call id, now)."""
    t = datetime.now(timezone.utc)
    return ended(call_start(str(uuid.uuid4()), team, t), t)
