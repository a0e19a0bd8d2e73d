"""Admission: what a decided call must hold before it is forwarded — a count against its run's
budget, its estimated tokens against the daily token quotas, a place in the rate limits — as
one Reservation, held, then settled by the tool's reply or released without one."""

from __future__ import annotations

import asyncio

import structlog

from pdp.decision import Decision
from proxy.core.call import Call, Ending
from proxy.core.limits.limiter import Limiter, LimitsUnavailable, TokenReservation
from proxy.core.run_budget import BudgetUnavailable, RunBudgets
from proxy.metrics import Metrics

log = structlog.get_logger("toolproxy.pipeline")


class Admission:
    def __init__(self, *, limiter: Limiter, budgets: RunBudgets, metrics: Metrics) -> None:
        self.limiter = limiter
        self.budgets = budgets
        self.metrics = metrics

    def reservation(self, call: Call) -> Reservation:
        return Reservation(self, call)


class Reservation:
    """What one call holds from admission until it ends."""

    __slots__ = ("_a", "_call", "_run_counted", "_price", "_tokens")

    def __init__(self, admission: Admission, call: Call) -> None:
        self._a = admission
        self._call = call
        self._run_counted = False  # counted against a registered run's budget
        # The tool's fixed price per call, charged to the run with its count (one write, not
        # two, for a fixed-price call); given back if the call ends without a reply.
        self._price = call.manifest.cost.per_call
        self._tokens: TokenReservation | None = None  # its estimated tokens, until it ends

    async def hold(self, decision: Decision) -> Ending | None:
        """None when admitted, else how the call ends (it is not forwarded; whatever was taken
        is given back)."""
        a, call = self._a, self._call
        run = call.agent_run_id
        info = a.budgets.known(call.identity.team_id, run) if run is not None else None
        if info is None or info.status != "active" or not info.budgeted:
            refused = await self._count_run() if run is not None else None  # no round trip
            if refused is not None:
                return refused
            try:
                return await self._hold_limits(decision)
            except asyncio.CancelledError:  # the client went away: nothing will run
                self.give_back()
                raise
        # A budgeted run: its count and the limits, a round trip each, asked together. The
        # run's refusal comes first; a refused call gives back what it took (a rate-limit token
        # taken for a call its run refused stays spent: the limits err on the safe side).
        counting = asyncio.ensure_future(self._count_run())
        try:
            limited = await self._hold_limits(decision)
            refused = await counting
        except BaseException:
            counting.cancel()  # a count on its way is given back once it lands (RunBudgets)
            self.give_back()
            raise
        if refused is not None:
            await self.release(executed=False)
            return refused
        if limited is not None:
            await self.release(executed=False)
        return limited

    async def _count_run(self) -> Ending | None:
        """Count the call against its run's budget: None when counted (or nothing to count),
        else the refusal."""
        a, call = self._a, self._call
        run = call.agent_run_id or ""
        try:
            refusal = await a.budgets.reserve(call.identity.team_id, run, self._price)
        except BudgetUnavailable:
            return Ending("UNAVAILABLE", "dependency_unavailable",
                          "the run's budget could not be checked; nothing was executed")
        if refusal is not None:
            message = ("the run is completed" if refusal == "run_completed"
                       else "the run's budget is used up")
            return Ending("DENIED", refusal, message, reasons=[refusal])
        info = a.budgets.known(call.identity.team_id, run)
        self._run_counted = info is not None and info.budgeted
        return None

    async def _hold_limits(self, decision: Decision) -> Ending | None:
        a, call = self._a, self._call
        m = call.manifest
        try:
            # A metered tool's estimated tokens are held first: refused here, nothing else was
            # taken; refused below, they are given back.
            refused = await self._hold_tokens()
            if refused is None:
                admission = await a.limiter.admit(
                    team_id=call.identity.team_id, agent_id=call.identity.agent_id, tool=m.tool_id,
                    category=m.category, rate=decision.obligations.rate,
                )
                if not admission.allowed:
                    assert admission.code is not None and admission.reason is not None
                    refused = self._limited(admission.code, admission.reason,
                                            admission.retry_after)
        except LimitsUnavailable as exc:
            a.metrics.limits_errors.inc()
            log.warning("limits_unavailable", error=str(exc))
            refused = Ending("UNAVAILABLE", "limits_unavailable",
                             "rate limits could not be checked; nothing was executed")
        if refused is None:
            return None
        await self.release(executed=False)
        return refused

    async def _hold_tokens(self) -> Ending | None:
        """Reserve the tool's declared token estimate against the daily token quotas: None
        when held (or nothing to hold), else the refusal."""
        call = self._call
        estimate = call.manifest.token_estimate
        if estimate is None:
            return None
        held = await self._a.limiter.reserve_tokens(
            team_id=call.identity.team_id, agent_id=call.identity.agent_id,
            tokens=estimate.tokens(call.args))
        if not held.allowed:
            return self._limited("quota_exceeded", "quota_tokens_estimate", held.retry_after)
        if held.tokens:
            self._tokens = held
        return None

    def _limited(self, code: str, reason: str, retry_after: float) -> Ending:
        self._a.metrics.limited.labels(category=self._call.manifest.category, code=code,
                                       reason=reason).inc()
        message = ("rate limit reached for this tool" if code == "rate_limited"
                   else "today's token quota cannot hold this call's estimate"
                   if reason == "quota_tokens_estimate" else "today's quota is used up")
        return Ending("DENIED", code, message, reasons=[reason], retry_after=retry_after)

    def settle(self, tokens: int, compute: float, cost: float) -> None:
        """The tool answered: the limits count what it used (the held estimate replaced by the
        real figure), and so does its run's budget."""
        a, call = self._a, self._call
        held, self._tokens = self._tokens, None
        a.limiter.settle(team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                         tokens=tokens, compute=compute, cost=cost, reserved=held)
        if self._run_counted:
            self._run_counted = False  # settled: nothing to give back when it is released
            # Its price was charged with its count: only the metered part is left to add.
            a.budgets.settle(call.identity.team_id, call.agent_run_id or "", tokens,
                             round(cost - self._price, 12))

    async def release(self, *, executed: bool) -> None:
        """Ended without a reply to settle with: held tokens stay charged at their estimate if
        the tool was asked to run (a timeout, a cancel), else are given back, and so is the
        call's count against its run's budget (a budget counts the calls that ran)."""
        self._release_tokens(executed)
        if not self._run_counted:
            return
        self._run_counted = False
        call = self._call
        if not executed:
            await self._a.budgets.release(call.identity.team_id, call.agent_run_id or "", self._price)
        elif self._price:  # ran, but no reply priced it (a timeout, a cancel): not charged
            self._a.budgets.settle(call.identity.team_id, call.agent_run_id or "", 0, -self._price)

    def give_back(self) -> None:
        """`release` of a call that did not run, for a request being cancelled: nothing here
        waits (the budget's count is given back off the request path)."""
        self._release_tokens(False)
        if self._run_counted:
            self._run_counted = False
            call = self._call
            self._a.budgets.give_back(call.identity.team_id, call.agent_run_id or "", self._price)

    def _release_tokens(self, executed: bool) -> None:
        if self._tokens is not None:
            a, call = self._a, self._call
            held, self._tokens = self._tokens, None
            a.limiter.settle(team_id=call.identity.team_id, agent_id=call.identity.agent_id,
                             tokens=held.tokens if executed else 0, compute=0.0, cost=0.0,
                             reserved=held)
