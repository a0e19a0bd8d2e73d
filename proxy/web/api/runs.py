"""Runs (turns): start one with an optional budget, publish its plan, complete it, read it."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from aiohttp import web
from pydantic import Field

from proxy.web.keys import JOURNAL, PIPELINE, identity_of
from proxy.web.body import read_model
from proxy.errors import Forbidden, InvalidRequest, NotFound
from proxy.web.api.errors import RunConflict
from proxy.records.events import event
from wire.ids import ID_PATTERN
from proxy.identity.identity import Identity
from proxy.web.params import path_id
from proxy.web.responses import json_response
from proxy.core.input_rules import Amount, Count, StrictModel
from proxy.core.run_budget import BudgetUnavailable, RunBudgets
from proxy.records.runs import RunExists, RunRepository

routes = web.RouteTableDef()

MAX_PLAN_BYTES = 16_384


class Budget(StrictModel):
    max_calls: Count | None = None
    max_tokens: Count | None = None
    max_cost_1t: Amount | None = None


class StartRun(StrictModel):
    run_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=64)
    budget: Budget = Field(default_factory=Budget)


class Plan(StrictModel):
    plan: Any = Field(description=f"any JSON value, at most {MAX_PLAN_BYTES} bytes")


class Complete(StrictModel):
    outcome: str = Field(default="done", max_length=500)


def _repo(request: web.Request) -> RunRepository:
    return request.app[PIPELINE].runs


def _budgets(request: web.Request) -> RunBudgets:
    return request.app[PIPELINE].budgets


async def _with_used(request: web.Request, run: dict[str, Any],
                     calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`used`: a budgeted run's counters (the budget's own view), else the sum of its calls."""
    try:
        used = await _budgets(request).used(run["team_id"], run["run_id"])
    except BudgetUnavailable:
        used = None
    if used is not None:
        return {**run, "used": used.json()}
    if calls is None:
        calls = await _repo(request).calls(run["team_id"], run["run_id"])
    executed = [c for c in calls if c["status"] in ("COMPLETED", "FAILED", "CANCELLED")]
    # A model turn's model steps are llm.chat calls of the run: counted with the others.
    tokens = sum(c["tokens_used"] for c in calls)
    return {**run, "used": {"calls": len(executed), "tokens": tokens,
                            "cost_1t": sum(c["cost_1t"] for c in calls)}}


async def _publish(request: web.Request, identity: Identity, type_: str, run_id: str,
                   payload: dict[str, Any]) -> None:
    await request.app[JOURNAL].record(events=[event(identity.team_id, type_, run_id=run_id,
                                                    payload=payload)])


async def _owned(request: web.Request, identity: Identity, run_id: str) -> dict[str, Any]:
    run = await _repo(request).get(identity.team_id, run_id)
    if run is None:
        raise NotFound("no such run")
    if run["agent_id"] != identity.agent_id and not identity.is_governance:
        raise Forbidden("only the agent that started the run may change it")
    return run


@routes.post("/v1/runs")
async def start_run(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, StartRun)  # a body is required: `{}` for the defaults
    run_id = body.run_id or f"run_{uuid.uuid4().hex[:20]}"
    try:
        run = await _repo(request).create(
            team_id=identity.team_id, run_id=run_id, agent_id=identity.agent_id,
            max_calls=body.budget.max_calls, max_tokens=body.budget.max_tokens,
            max_cost_1t=body.budget.max_cost_1t)
    except RunExists:
        raise RunConflict(f"run {run_id!r} already exists") from None
    try:
        await _budgets(request).register(
            identity.team_id, run_id, max_calls=body.budget.max_calls,
            max_tokens=body.budget.max_tokens, max_cost_1t=body.budget.max_cost_1t)
    except BudgetUnavailable:
        pass  # the counter is rebuilt from the row on the run's first call
    await _publish(request, identity, "agent.turn.started", run_id, {"budget": run["budget"]})
    return json_response(201, {**run, "used": {"calls": 0, "tokens": 0, "cost_1t": 0.0}})


@routes.post("/v1/runs/{run_id}/plan")
async def plan(request: web.Request) -> web.Response:
    identity = identity_of(request)
    run_id = path_id(request, "run_id", "no such run")
    await _owned(request, identity, run_id)
    body = await read_model(request, Plan)
    if len(orjson.dumps(body.plan)) > MAX_PLAN_BYTES:
        raise InvalidRequest(f"a plan is at most {MAX_PLAN_BYTES} bytes of JSON")
    run = await _repo(request).set_plan(identity.team_id, run_id, body.plan)
    if run is None:
        raise RunConflict("the run is completed")
    await _publish(request, identity, "agent.plan.updated", run_id, {"plan": body.plan})
    return json_response(200, await _with_used(request, run))


@routes.post("/v1/runs/{run_id}/complete")
async def complete(request: web.Request) -> web.Response:
    identity = identity_of(request)
    run_id = path_id(request, "run_id", "no such run")
    await _owned(request, identity, run_id)
    body = await read_model(request, Complete) if request.body_exists else Complete()
    run = await _repo(request).complete(identity.team_id, run_id, body.outcome)
    if run is None:
        raise RunConflict("the run is already completed")
    try:
        await _budgets(request).complete(identity.team_id, run_id)
    except BudgetUnavailable:
        pass  # every replica's directory already says completed (NOTIFY)
    run = await _with_used(request, run)
    await _publish(request, identity, "agent.turn.completed", run_id,
                   {"outcome": body.outcome, "used": run["used"]})
    return json_response(200, run)


@routes.get("/v1/runs/{run_id}")
async def get_run(request: web.Request) -> web.Response:
    identity = identity_of(request)
    run_id = path_id(request, "run_id", "no such run")
    repo = _repo(request)
    run = await repo.get(identity.team_id, run_id)
    calls = await repo.calls(identity.team_id, run_id)
    if run is None and not calls:
        raise NotFound("no such run")
    totals = {
        "calls": len(calls),
        "completed": sum(1 for c in calls if c["status"] == "COMPLETED"),
        "tokens_used": sum(c["tokens_used"] for c in calls),
        "cost_1t": sum(c["cost_1t"] for c in calls),
    }
    view = await _with_used(request, run, calls) if run is not None else {
        "run_id": run_id, "status": "unregistered"}
    return json_response(200, {**view, "calls": calls, "totals": totals})
