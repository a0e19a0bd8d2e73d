"""A call with an idempotency key: claimed atomically per team, so one execution per key; a
replay gets the original response; the same key with another intent is a conflict; while the
first run is still going, a replay is told so rather than kept waiting. The key's states and
why they live in JetStream: proxy/core/idempotency.py.

A key whose holder stopped (its replica died, or it paused past its lease) is settled here, by
the next request that names it: claimed only (its tool never got the call), the new request
takes it over and runs the call — a clean retry; running (the tool may have run), it ends as
the call's record says, and with no ending recorded it ends lost (FAILED proxy_lost), never
run again. Reading the record needs the journal and Postgres to answer, within a bound: if
they cannot, the request is refused (503) with nothing run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import structlog
from nats.js.errors import KeyWrongLastSequenceError

from infra.db import within
from proxy.core.accounting import kept_body
from proxy.core.call import Call
from proxy.core.errors import IdempotencyConflict, IdempotencyInProgress, IdempotencyUnavailable
from proxy.core.housekeeping import LOST
from proxy.core.idempotency import RUNNING, Claim, IdempotencyStore, Unavailable, intent_hash
from proxy.core.outcome import HttpStatusOf, Outcome, response_body
from proxy.records.calls import read_ending, read_response
from proxy.records.journal import Journal

log = structlog.get_logger("toolproxy.idempotency")

Run = Callable[[Call], Awaitable[Outcome]]

CLAIM_LEASE_S = 5.0  # from the claim to the fence: the decision and the admission
LOOKUP_TIMEOUT_S = 1.0  # reading a stale call's record (the journal, then Postgres)


class Idempotent:
    """`lost_after_s`: how long a silent replica's calls are given (TOOLPROXY_LOST_AFTER_S):
    a running key's lease is its call's timeout and that, past which it is settled."""

    def __init__(self, *, store: IdempotencyStore, pool: asyncpg.Pool, journal: Journal,
                 http_status: HttpStatusOf, lost_after_s: float) -> None:
        self._store = store
        self._pool = pool  # the calls' rows, for a held call that has moved on since
        self._journal = journal
        self._http_status = http_status
        self._lost_after_s = lost_after_s

    async def __call__(self, call: Call, key: str, run: Run) -> Outcome:
        team = call.identity.team_id
        intent = intent_hash(call.manifest.tool_id, call.args,
                             {"agent_run_id": call.agent_run_id, "confidential": call.confidential})
        claim = await self._claim(call, key, intent)
        if claim.stale:  # running when its holder stopped: settled as its record says
            settled = await self._settle(call, key, intent, claim)
            if isinstance(settled, Outcome):
                return settled
            claim = settled
        if not claim.owned:
            return await self._answer(claim)
        hold = _Hold(claim.revision)
        call.idempotency_key = key
        call.fence = lambda: self._fence(call, key, intent, hold)
        try:
            outcome = await run(call)
        except BaseException:
            await asyncio.shield(self._release(team, key, call.call_id, hold))
            raise
        if outcome.retry_later:
            await self._release(team, key, call.call_id, hold)
        else:
            await asyncio.shield(self._complete(call, key, intent, hold, outcome))
        return outcome

    async def _claim(self, call: Call, key: str, intent: str) -> Claim:
        try:
            claim = await self._store.claim(call.identity.team_id, key, intent, call.call_id,
                                            lease_s=CLAIM_LEASE_S)
            if claim.stale and claim.state != RUNNING:
                # Its holder stopped before its tool got the call: a clean retry.
                return await self._take_over(call, key, intent, claim)
            return claim
        except Unavailable as exc:
            raise IdempotencyUnavailable(
                "the idempotency store did not answer; nothing was run, retry shortly",
                headers={"Retry-After": "1"}) from exc

    async def _take_over(self, call: Call, key: str, intent: str, stale: Claim) -> Claim:
        """Ours, unless another request took it over first (then: in progress)."""
        taken = await self._store.take_over(call.identity.team_id, key, intent, call.call_id,
                                            stale, lease_s=CLAIM_LEASE_S)
        if taken is None:
            return Claim(owned=False, call_id=stale.call_id, in_progress=True, retry_after=1.0)
        log.info("idempotency_key_taken_over", previous_call_id=stale.call_id)
        return taken

    async def _answer(self, claim: Claim) -> Outcome:
        if claim.conflict:
            raise IdempotencyConflict("this idempotency key was used for a different call")
        if claim.in_progress:
            raise IdempotencyInProgress(
                "a call with this idempotency key is still running",
                headers={"Retry-After": str(max(1, int(claim.retry_after + 0.999)))})
        assert claim.response is not None and claim.http_status is not None
        return await self._replay(claim.call_id, claim.http_status, claim.response)

    async def _fence(self, call: Call, key: str, intent: str, hold: _Hold) -> None:
        """Just before the tool gets the call: the key is still this request's, now running
        until its deadline has passed for a silent replica's calls."""
        lease = call.manifest.deadline_ms / 1000.0 + self._lost_after_s + 2.0
        try:
            hold.revision = await self._store.running(call.identity.team_id, key, call.call_id,
                                                      intent, hold.revision, lease_s=lease)
        except KeyWrongLastSequenceError:
            hold.lost = True
            raise IdempotencyUnavailable("this request's claim on its idempotency key was taken "
                                         "over by a retry; nothing was run here") from None
        except Unavailable as exc:
            raise IdempotencyUnavailable("the idempotency store did not answer; nothing was run, "
                                         "retry shortly") from exc

    async def _complete(self, call: Call, key: str, intent: str, hold: _Hold, outcome: Outcome) -> None:
        if hold.lost:
            return
        try:
            done = await self._store.complete(
                call.identity.team_id, key, call.call_id, intent, hold.revision,
                self._http_status(outcome), kept_body(response_body(outcome), call.confidential))
        except Unavailable as exc:
            # The call's record has its ending: the next request naming the key, past the
            # lease, answers from it.
            log.warning("idempotency_complete_failed", error=str(exc))
            return
        if not done:
            log.warning("idempotency_key_settled_elsewhere")

    async def _release(self, team: str, key: str, call_id: str, hold: _Hold) -> None:
        if hold.lost:
            return
        try:
            await self._store.release(team, key, call_id, hold.revision)
        except Unavailable as exc:  # the lease lets it go by itself
            log.warning("idempotency_release_failed", error=str(exc))

    async def _settle(self, call: Call, key: str, intent: str, claim: Claim) -> Outcome | Claim:
        """A running key past its lease: the call's ending as recorded, or lost; or, if it
        ended having run nothing (unavailable, rate limited), the key taken over."""
        try:
            recorded = await within(LOOKUP_TIMEOUT_S, self._recorded(claim.call_id))
        except Exception as exc:
            raise IdempotencyUnavailable(
                "the first call with this idempotency key cannot be read back now; nothing was "
                "run, retry shortly", headers={"Retry-After": "1"}) from exc
        if recorded == "running":  # its replica stopped: housekeeping resolves it shortly
            raise IdempotencyInProgress("a call with this idempotency key is being resolved",
                                        headers={"Retry-After": "1"})
        if recorded is None:
            lost = Outcome(status=LOST.status, code=LOST.code, message=LOST.message,
                           call_id=claim.call_id)
            http_status, body = self._http_status(lost), response_body(lost)
        else:
            http_status, body = recorded
            if Outcome.from_recorded(http_status, body).retry_later:
                try:
                    return await self._take_over(call, key, intent, claim)
                except Unavailable as exc:
                    raise IdempotencyUnavailable("the idempotency store did not answer; nothing "
                                                 "was run, retry shortly",
                                                 headers={"Retry-After": "1"}) from exc
        try:
            await self._store.complete(call.identity.team_id, key, claim.call_id, intent,
                                       claim.revision, http_status, body)
        except Unavailable as exc:
            log.warning("idempotency_complete_failed", error=str(exc))
        log.warning("idempotency_key_settled", previous_call_id=claim.call_id,
                    lost=recorded is None)
        return await self._replay(claim.call_id, http_status, body)

    async def _recorded(self, call_id: str) -> tuple[int, dict[str, Any]] | str | None:
        """The call's kept response, "running" if it is on record without one, or None if it is
        on record nowhere. The journal first, then Postgres: a record the writer commits and
        acknowledges in between is found by the second look. Raises if either cannot answer."""
        record = await self._journal.call_record(call_id)
        if record is not None and record.response is not None and record.http_status is not None:
            return record.http_status, record.response
        row = await read_ending(self._pool, call_id)
        if row is not None and row[0] is not None and row[1] is not None:
            return row[0], row[1]
        if row is not None or record is not None:
            return "running"
        return None

    async def _replay(self, call_id: str, http_status: int, body: dict[str, Any]) -> Outcome:
        if body.get("status") == "AUTHORIZATION_REQUIRED":
            # The call may have moved on since (approved and resumed, denied, expired).
            try:
                moved = await within(LOOKUP_TIMEOUT_S, read_response(self._pool, call_id))
            except Exception as exc:
                raise IdempotencyUnavailable(
                    "the held call cannot be read back now; retry shortly",
                    headers={"Retry-After": "1"}) from exc
            if moved is not None:
                http_status, body = moved
        return Outcome.from_recorded(http_status, body, replayed=True)


class _Hold:
    """This request's hold on its key: the revision it last wrote, or lost to a take-over."""

    __slots__ = ("revision", "lost")

    def __init__(self, revision: int) -> None:
        self.revision = revision
        self.lost = False
