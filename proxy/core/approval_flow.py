"""Resuming approved calls exactly once, and recording the ending of refused ones.

A resumed call is decided again (the policy sees the approval's state and whether the
arguments still match the approved hash) and executed at most once: the approved -> executing
transition has a single winner; the response is stored and replayed to every later resume.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone
from typing import Any

import structlog

from pdp.data.approvals import Approval, ApprovalError, ApprovalRepository, StoredCall
from proxy.core.accounting import kept_body
from proxy.core.call import Call, Ending
from proxy.core.catalog import Catalog
from proxy.core.errors import CallInProgress
from proxy.core.outcome import HttpStatusOf, Outcome, response_body
from infra.lifecycle import cancel_and_wait
from wire.digest import args_digest
from proxy.errors import ApiError, InvalidRequest, NotFound
from proxy.identity.identity import Identity
from proxy.core.pipeline import Pipeline

log = structlog.get_logger("toolproxy.approvals")


class ApprovalFlow:
    """`http_status`: how the native surface answers an outcome; a stored ending keeps it."""

    def __init__(self, pipeline: Pipeline, *, approvals: ApprovalRepository, catalog: Catalog,
                 http_status: HttpStatusOf) -> None:
        self.pipeline = pipeline
        self.approvals = approvals
        self.catalog = catalog
        self._http_status = http_status
        self._sweeper: asyncio.Task[None] | None = None

    # --- the agent resumes ----------------------------------------------------------------

    async def resume(self, identity: Identity, call_id: str, args: dict[str, Any] | None) -> Outcome:
        found = await self._load(call_id)
        approval, stored = found
        # Only the agent that made the call may resume it; anyone else learns nothing (404).
        if (approval.team_id, approval.agent_id) != (identity.team_id, identity.agent_id):
            raise NotFound("no such call")
        if stored.response is not None:
            return _recorded(stored)
        if approval.state in ("pending", "approved") and approval.expires_at <= _now():
            await self.sweep()
            approval, stored = await self._load(call_id)
            if stored.response is not None:
                return _recorded(stored)
        if approval.state == "pending":
            return Outcome.held(call_id=stored.call_id, decision_id="",
                                approval_id=approval.approval_id,
                                expires_at=approval.expires_at.isoformat(), reasons=approval.reasons)
        if approval.state in ("denied", "expired"):
            await self.finish_refused(call_id)
            return await self._stored_or_in_progress(call_id)
        if approval.state == "approved":
            call_args = self._args_for(stored, args)
            if not await self.approvals.claim(call_id):
                return await self._stored_or_in_progress(call_id)
            return await self._execute_approved(identity, approval, stored, call_args)
        return await self._stored_or_in_progress(call_id)  # executing / executed

    def _args_for(self, stored: StoredCall, given: dict[str, Any] | None) -> dict[str, Any]:
        """The approved arguments. Confidential ones were never stored: the agent sends them
        again. Different arguments are refused before anything is consumed: changing them
        needs a new call and a new approval (the policy checks the hash again, too)."""
        if stored.confidential and given is None:
            raise InvalidRequest("this confidential call's arguments must be sent again to resume it")
        args = given if given is not None else stored.args
        assert args is not None
        if args_digest(args)[0] != stored.args_hash:
            raise InvalidRequest("the arguments differ from the approved ones; invoke the tool again")
        return args

    async def _execute_approved(self, identity: Identity, approval: Approval,
                                stored: StoredCall, args: dict[str, Any]) -> Outcome:
        call = self._call_for(identity, approval, stored, args)
        call.approval = {"state": "approved", "args_match": args_digest(args)[0] == approval.args_hash,
                         "binding": approval.binding}
        with self.pipeline.bound(call):
            outcome = await self.pipeline.run(call)
        if outcome.retry_later:
            # Rate limited or a dependency away: nothing ran, the approval stands; the agent
            # resumes again after Retry-After.
            await asyncio.shield(self.approvals.unclaim(stored.call_id))
            return outcome
        await asyncio.shield(self.approvals.complete(
            stored.call_id, status=outcome.status, http_status=self._http_status(outcome),
            response=kept_body(response_body(outcome), call.confidential),
            decision_id=call.decision_id))
        log.info("approved_call_executed", call_id=stored.call_id, status=outcome.status)
        return outcome

    async def _stored_or_in_progress(self, call_id: str) -> Outcome:
        _, stored = await self._load(call_id)
        if stored.response is not None:
            return _recorded(stored)
        raise CallInProgress("the call is being executed; ask again shortly")

    async def _load(self, call_id: str) -> tuple[Approval, StoredCall]:
        try:
            found = await self.approvals.for_call(call_id)
        except ApprovalError:
            found = None
        if found is None:
            raise NotFound("no such call")
        return found

    # --- refused calls end exactly once -----------------------------------------------------

    async def finish_refused(self, call_id: str) -> None:
        """A denied or expired call: decided once more (the policy denies it, with the reason),
        its usage and decision recorded and its response stored, by exactly one caller."""
        state = await self.approvals.claim_refused(call_id)
        if state is None:
            return
        approval, stored = await self._load(call_id)
        manifest = self.catalog.get(stored.tool)
        if manifest is None:  # the catalog persists manifests; this is a corrupted catalog
            log.error("refused_call_tool_missing", call_id=call_id, tool=stored.tool)
            return
        identity = Identity(agent_id=stored.agent_id, team_id=stored.team_id, role="agent", token_id="")
        args = stored.args if stored.args is not None else {}
        call = self._call_for(identity, approval, stored, args)
        call.approval = {"state": state, "args_match": True}
        with self.pipeline.bound(call):
            outcome = await self.pipeline.run(call)
        await self.approvals.store_ending(
            call_id, status=outcome.status, http_status=self._http_status(outcome),
            response=kept_body(response_body(outcome), call.confidential),
            decision_id=call.decision_id)

    def _call_for(self, identity: Identity, approval: Approval, stored: StoredCall,
                  args: dict[str, Any]) -> Call:
        manifest = self.catalog.get(stored.tool)
        if manifest is None:
            raise ApiError("the tool of this call is no longer in the catalog")
        return Call(
            identity=identity,
            manifest=manifest,
            args=args,
            agent_run_id=stored.agent_run_id,
            confidential=stored.confidential,
            call_id=stored.call_id,
            decision_id=str(uuid.uuid4()),
            resumed=True,
            turn_id=stored.turn_id,
        )

    async def cancel_held(self, call_id: str, by: str) -> bool:
        """Cancel a call that waits for (or holds) an approval: it ends CANCELLED, once."""
        if not await self.approvals.cancel(call_id):
            return False
        approval, stored = await self._load(call_id)
        identity = Identity(agent_id=stored.agent_id, team_id=stored.team_id, role="agent", token_id="")
        call = self._call_for(identity, approval, stored, stored.args or {})
        outcome = await self.pipeline.end_unexecuted(
            call, Ending("CANCELLED", "cancelled", f"cancelled by {by} before it ran"))
        await self.approvals.store_ending(call_id, status=outcome.status,
                                          http_status=self._http_status(outcome),
                                          response=kept_body(response_body(outcome),
                                                             call.confidential),
                                          decision_id=call.decision_id)
        return True

    # --- governance decides ------------------------------------------------------------------

    async def decide(self, approval_id: str, *, approve: bool, by: str, reason: str) -> Approval:
        approval = await self.approvals.decide(approval_id, approve=approve, by=by, reason=reason)
        if not approve:
            await self.finish_refused(approval.call_id)
        return approval

    # --- expiry ------------------------------------------------------------------------------

    async def sweep(self) -> int:
        expired = await self.approvals.expire_due()
        for call_id in expired:
            await self.finish_refused(call_id)
        return len(expired)

    def start_sweeper(self, every_s: float = 15.0) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(every_s)
                try:
                    await self.sweep()
                except Exception as exc:  # Postgres away: the next round retries
                    log.warning("approval_sweep_failed", error=str(exc))

        self._sweeper = asyncio.create_task(loop(), name="approval-sweeper")

    async def close(self) -> None:
        await cancel_and_wait(self._sweeper)


def _recorded(stored: StoredCall) -> Outcome:
    assert stored.response is not None
    return Outcome.from_recorded(stored.http_status or 200, stored.response)


def _now() -> datetime:
    return datetime.now(timezone.utc)
