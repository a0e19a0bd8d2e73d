"""Calls held for a governance approval as MCP tasks, in both protocol eras.

A task is a call: its id is the call_id, its owner the agent that made the call (anyone else
is told "not found"), and its state is read, never kept here — from the approval while the
call is held (Postgres, shared by every replica), from the call's record once it ended. So
any replica answers any poll, and nothing is lost with a process.

- held (approval pending)  -> `working`, with what it waits for;
- approved                 -> the poll that sees it runs the call, exactly once (the approval
                              flow's resume), and answers its ending;
- ended (ran, denied, expired, cancelled) -> terminal, with the tool result a plain call
  would have answered (a denial is a result with isError, saying what to ask for).

`wait` serves the blocking `tasks/result` of 2025-11-25: it re-reads on every change of an
approval of the caller's team (the approvals channel's NOTIFY, from any replica).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import asyncpg

from infra.wakeups import TeamWakeups
from pdp.data.approvals import ApprovalError
from proxy.core.approval_flow import ApprovalFlow
from proxy.core.errors import CallInProgress
from proxy.core.outcome import Outcome
from proxy.errors import InvalidRequest, NotFound
from proxy.identity.identity import Identity
from proxy.records.journal import Journal
from proxy.records.reads import read_call_now

POLL_INTERVAL_MS = 500  # what a client is asked to wait between polls
MAX_WAIT_S = 60.0  # the longest a blocking tasks/result waits before telling the client to poll
TERMINAL = ("completed", "failed", "cancelled")
MAX_TASK_ID = 64


@dataclass(frozen=True, slots=True)
class TaskState:
    task_id: str
    status: str  # working | completed | cancelled (the era renders isError results)
    message: str
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    outcome: Outcome | None = None  # when terminal: what the call answered
    tool: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class McpTasks:
    def __init__(self, flow: ApprovalFlow, pool: asyncpg.Pool, journal: Journal,
                 hub: TeamWakeups | None) -> None:
        self.flow = flow
        self.pool = pool
        self.journal = journal
        self.hub = hub

    async def state(self, identity: Identity, task_id: str) -> TaskState:
        """The task's state now; an approved call is run by this very read (exactly once)."""
        if not 0 < len(task_id) <= MAX_TASK_ID:
            raise NotFound("no such task")
        approval = await self._approval(identity, task_id)
        if approval is None:
            return await self._from_record(identity, task_id)
        created = approval.requested_at
        ttl_ms = max(0, int((approval.expires_at - created).total_seconds() * 1000))
        try:
            outcome = await self.flow.resume(identity, task_id, None)
        except CallInProgress:
            return TaskState(task_id, "working", "Approved; the call is running now.", created,
                             _now(), ttl_ms, tool=approval.tool)
        except InvalidRequest as exc:  # a confidential call: its arguments were never kept
            return TaskState(task_id, "working", f"Approved, but {exc.message}: call "
                             "_toolproxy_resume with the call_id and the same arguments.",
                             created, _now(), ttl_ms, tool=approval.tool)
        if outcome.status == "AUTHORIZATION_REQUIRED":
            return TaskState(task_id, "working", waiting_message(outcome), created,
                             approval.decided_at or created, ttl_ms, tool=approval.tool)
        if outcome.retry_later:  # approved, but rate limited or a dependency away: not yet
            return TaskState(task_id, "working", f"Approved; not run yet ({outcome.code}): "
                             f"{outcome.message}. It runs on a later poll.", created, _now(),
                             ttl_ms, tool=approval.tool)
        status = "cancelled" if outcome.status == "CANCELLED" else "completed"
        return TaskState(task_id, status, ending_message(outcome), created, _now(), ttl_ms,
                         outcome, approval.tool)

    async def wait(self, identity: Identity, task_id: str, timeout: float = MAX_WAIT_S) -> TaskState:
        """The state once terminal, or the last one read after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            ticket = self.hub.ticket(identity.team_id) if self.hub is not None else None
            current = await self.state(identity, task_id)
            left = deadline - time.monotonic()
            if current.terminal or left <= 0:
                return current
            if ticket is None:
                await asyncio.sleep(min(left, POLL_INTERVAL_MS / 1000))
            else:
                # The timeout is a keepalive (a retry-later approval runs on a later read).
                await self.hub.wait(ticket, min(left, 5.0))

    async def cancel(self, identity: Identity, task_id: str) -> TaskState:
        """Cancel a held call (it ends CANCELLED, once); a terminal task raises TaskEnded."""
        current = await self.state(identity, task_id)
        if current.terminal:
            raise TaskEnded(f"Cannot cancel: the task is already {current.status}")
        if await self.flow.cancel_held(task_id, by=f"agent {identity.agent_id} (MCP tasks/cancel)"):
            return await self.state(identity, task_id)
        ended = await self.state(identity, task_id)  # it ended meanwhile
        if ended.terminal and ended.status != "cancelled":
            raise TaskEnded(f"Cannot cancel: the task is already {ended.status}")
        return ended

    async def _approval(self, identity: Identity, call_id: str) -> Any:
        try:
            found = await self.flow.approvals.for_call(call_id)
        except ApprovalError:
            return None
        if found is None:
            return None
        approval = found[0]
        if (approval.team_id, approval.agent_id) != (identity.team_id, identity.agent_id):
            raise NotFound("no such task")
        return approval

    async def _from_record(self, identity: Identity, call_id: str) -> TaskState:
        """A call that was never held (a task made for a call that ended at once)."""
        call = await read_call_now(self.pool, self.journal, call_id, identity.team_id)
        if call is None or call["agent_id"] != identity.agent_id:
            raise NotFound("no such task")
        created = _parse(call["created_at"]) or _now()
        updated = _parse(call["finished_at"]) or created
        if call["status"] in ("RUNNING", "PENDING", "AUTHORIZATION_REQUIRED"):
            return TaskState(call_id, "working", "The call is running.", created, updated, None,
                             tool=call["tool"])
        outcome = Outcome.from_recorded(int(call["http_status"] or 200), _body(call))
        status = "cancelled" if outcome.status == "CANCELLED" else "completed"
        return TaskState(call_id, status, ending_message(outcome), created, updated, None,
                         outcome, call["tool"])


class TaskEnded(Exception):
    """Cancelling a task that already ended (both eras answer invalid params)."""


def waiting_message(o: Outcome) -> str:
    return (f"Waiting for a governance approval (approval_id {o.approval_id}, expires "
            f"{o.expires_at}); nothing has run yet. The task completes with the tool's result "
            "once it is approved, or with the denial.")


def ending_message(o: Outcome) -> str:
    if o.ok:
        return "The call ran; the result is ready."
    if o.status == "CANCELLED":
        return "The call was cancelled before it ran."
    return f"The call ended {o.status or 'refused'} ({o.code})."


def _body(call: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"ok": call["status"] == "COMPLETED", "status": call["status"],
                            "call_id": call["call_id"], "decision_id": call["decision_id"]}
    if call["status"] == "COMPLETED":
        body.update(output=call["output"], tokens_used=call["tokens_used"],
                    cost_1t=call["cost_1t"], result_id=call["result_id"])
    elif call["error"] is not None:
        body["error"] = call["error"]
    return body


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def iso(d: datetime) -> str:
    return d.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
