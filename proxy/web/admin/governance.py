"""Governance administration: overrides, the decision log and policy revisions."""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import Field

from pdp.decision_log import query_decisions
from pdp.rego_tests import run_policy_tests
from pdp.policy_set import PolicySet
from pdp.policy_store import activate, revisions
from proxy.web.admin.keys import OVERRIDE_REPO
from proxy.web.keys import CATALOG, PDP, POOL, SETTINGS, identity_of
from proxy.web.body import read_model
from proxy.web.admin.errors import PolicyRejected
from proxy.errors import Forbidden, InvalidRequest, NotFound, UnknownTool
from wire.ids import ID_PATTERN
from proxy.web.params import query_choice, query_id, query_int, query_time, query_uuid
from proxy.web.access import applied_here, governed_team, require_governance
from proxy.web.responses import json_response
from proxy.core.input_rules import TOOL_NAME_PATTERN, PerMinute, StrictModel, Timestamp, TimeoutMs
from wire.categories import CATEGORIES
from wire.manifest import TOOL_NAME_MAX, is_valid_tool_name

routes = web.RouteTableDef()


# The entrypoint every decision comes from (pdp.policy_set.ENTRYPOINT): a set without it would
# compile, pass its tests, and then answer policy_undefined (503) to every call of every team.
_DECIDES = re.compile(r"^package\s+toolproxy\.authz\s*$.*?^(?:default\s+)?decision\b",
                      re.M | re.S | re.ASCII)


RESULTS = ("allow", "deny", "approval_required", "error")
MAX_MODULE_CHARS = 256 << 10

MODULE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,94}\.rego$"  # a plain file name
ModuleName = Annotated[str, Field(pattern=MODULE_NAME_PATTERN, max_length=100)]


def _modules_schema(schema: dict[str, Any]) -> None:
    # Stated as propertyNames: every key must match (patternProperties would let others by).
    schema.pop("patternProperties", None)
    schema["propertyNames"] = {"pattern": MODULE_NAME_PATTERN, "maxLength": 100}
    schema["additionalProperties"] = {"type": "string", "maxLength": MAX_MODULE_CHARS}


class OverrideRequest(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tool: str = Field(pattern=TOOL_NAME_PATTERN, max_length=TOOL_NAME_MAX)
    effect: Literal["allow", "deny"] = "allow"
    timeout_ms: TimeoutMs | None = None
    rate_per_minute: PerMinute | None = None
    reason: str = Field(default="", max_length=500)
    expires_at: Timestamp | None = None


class OverrideKey(StrictModel):
    team_id: str = Field(pattern=ID_PATTERN, max_length=64)
    agent_id: str = Field(pattern=ID_PATTERN, max_length=64)
    tool: str = Field(pattern=TOOL_NAME_PATTERN, max_length=TOOL_NAME_MAX)


class PolicyPush(StrictModel):
    modules: dict[ModuleName, Annotated[str, Field(max_length=MAX_MODULE_CHARS)]] = Field(
        min_length=1, max_length=64, json_schema_extra=_modules_schema)


# The rate rule (stated once in pdp/policies/authz.rego and in the docs' "Rates"): a team's
# governance only tightens — at most the category's default; raising a rate above it takes an
# admin (at most PerMinute's bound, 1,000,000/min). A team rule can only lower it further.


def check_override_rate(by_admin: bool, category: str, rate: int) -> None:
    default = CATEGORIES[category].rate_per_minute
    if not by_admin and rate > default:
        raise Forbidden(f"governance can only tighten a rate: at most {default}/min for a "
                        f"category-{category} tool (its default); raising it takes an admin")


@routes.post("/v1/admin/overrides")
async def put_override(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, OverrideRequest)
    require_governance(identity, body.team_id)
    manifest = request.app[CATALOG].get(body.tool)
    if manifest is None:
        raise UnknownTool(f"no tool named {body.tool!r}")
    if body.agent_id == identity.agent_id and body.effect == "allow":
        raise Forbidden("no self-authorization: you cannot allow tools for yourself")
    if body.rate_per_minute is not None:
        check_override_rate(identity.is_admin, manifest.category, body.rate_per_minute)
    o = await request.app[OVERRIDE_REPO].put(
        team_id=body.team_id, agent_id=body.agent_id, tool=body.tool, effect=body.effect,
        timeout_ms=body.timeout_ms, rate_per_minute=body.rate_per_minute, reason=body.reason,
        created_by=identity.actor,
        expires_at=body.expires_at,
    )
    await applied_here(request, body.team_id)
    return json_response(201, {"override": o.as_json()})


@routes.get("/v1/admin/overrides")
async def list_overrides(request: web.Request) -> web.Response:
    team = governed_team(request, identity_of(request))
    rows = await request.app[OVERRIDE_REPO].list(team)
    return json_response(200, {"overrides": [o.as_json() for o in rows]})


@routes.post("/v1/admin/overrides/delete")
async def delete_override(request: web.Request) -> web.Response:
    identity = identity_of(request)
    body = await read_model(request, OverrideKey)
    require_governance(identity, body.team_id)
    o = await request.app[OVERRIDE_REPO].delete(team_id=body.team_id, agent_id=body.agent_id, tool=body.tool)
    if o is None:
        raise NotFound("no such override")
    await applied_here(request, body.team_id)
    return json_response(200, {"override": o.as_json()})


@routes.get("/v1/admin/decisions")
async def decisions(request: web.Request) -> web.Response:
    q = request.query
    team = governed_team(request, identity_of(request))
    if q.get("tool") is not None and not is_valid_tool_name(q["tool"]):
        raise InvalidRequest("tool is not a valid tool name")
    rows = await query_decisions(
        request.app[POOL], team_id=team, agent_id=query_id(q, "agent_id"), tool=q.get("tool"),
        result=query_choice(q, "result", RESULTS), phase=query_choice(q, "phase", ("list", "call")),
        call_id=query_uuid(q, "call_id"), since=query_time(q, "since"),
        until=query_time(q, "until"), limit=query_int(q, "limit", 100, lo=1, hi=1000),
    )
    return json_response(200, {"decisions": rows})


@routes.get("/v1/admin/policies")
async def list_policies(request: web.Request) -> web.Response:
    identity = identity_of(request)
    require_governance(identity, None)
    pdp = request.app[PDP]
    return json_response(200, {"serving": {"revision": pdp.revision, "engine": pdp.engine.name},
                               "revisions": await revisions(request.app[POOL])})


@routes.post("/v1/admin/policies")
async def push_policies(request: web.Request) -> web.Response:
    """Validate with the engine, then activate: every replica follows within a second.
    An invalid set is refused with the engine's own message; the serving revision stays.
    The global modules decide for every team: pushing them is an admin act (a team's
    governance shapes its own team's decisions with team rules, admin_team_rules.py)."""
    identity = identity_of(request)
    if not identity.is_admin:
        raise Forbidden("policy pushes need an admin token; governance shapes its team with "
                        "/v1/admin/team-rules")
    body = await read_model(request, PolicyPush)
    policies = PolicySet(
        modules={k: v for k, v in body.modules.items() if not k.endswith("_test.rego")},
        tests={k: v for k, v in body.modules.items() if k.endswith("_test.rego")},
    )
    if not any(_DECIDES.search(source) for source in policies.modules.values()):
        raise PolicyRejected("no module defines the decision: package toolproxy.authz, rule `decision`")
    # In a child process: some sources abort rego-cpp, which must not take this proxy down.
    # The pushed *_test.rego tests must pass too.
    results = await asyncio.to_thread(run_policy_tests, policies)
    failed = [r for r in results if not r.passed]
    if failed:
        if failed[0].name == "compile":
            raise PolicyRejected(f"the policy does not compile: {failed[0].error}")
        listed = "; ".join(f"{r.package}.{r.name}: {r.error}" for r in failed[:10])
        raise PolicyRejected(f"{len(failed)} policy test(s) failed: {listed}")
    # The tests it was pushed with and their results are kept with it (shown by the console).
    revision = await activate(request.app[POOL], policies,
                              created_by=identity.actor,
                              test_results=[asdict(r) for r in results])
    pinned = request.app[SETTINGS].policy_dir is not None
    return json_response(201, {"revision": revision, "active": True,
                               "note": "this replica serves its TOOLPROXY_POLICY_DIR" if pinned else None})
