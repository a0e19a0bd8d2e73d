"""The agent service: agent.invoke, a request on the callee's subject carrying the caller's
chain, checked first against the invocation records and the callee's registration."""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import ValidationError

from services.agents.config import AgentSettings
from services.agents.invocations import Invocation, Invocations, new_invocation_id
from services.agents.manifests import MANIFEST
from services.agents.protocol import (
    H_AGENT_CHAIN,
    H_INVOCATION_ID,
    MAX_REPLY_BYTES,
    AgentReply,
    AgentRequest,
    agent_subject,
)
from services.agents.store import AgentRepository
from services.agents.schemas import OBJECT_VALUE_SCHEMA
from services.agents.errors import (
    AgentBadReply,
    AgentCycle,
    AgentDepthExceeded,
    AgentFailed,
    AgentTimeout,
    AgentUnavailable,
    InvalidInput,
    InvalidInvocation,
    InvocationRequired,
)
from services.sdk import CallContext, ToolError
from services.sdk.errors import NotFound
from wire import protocol as p
from services.sdk.lifecycle import ResourcefulService
from services.sdk.service import ToolDef, ToolResult
from wire.validation import SchemaValidator

log = structlog.get_logger("toolproxy.agents")

# The reply must reach the proxy before the call's own deadline.
_MARGIN_S = 0.1

_OUTPUT = SchemaValidator(OBJECT_VALUE_SCHEMA)


class _State:
    nc: NATS | None = None


def service(pool: asyncpg.Pool, settings: AgentSettings | None = None) -> ResourcefulService:
    settings = settings or AgentSettings()
    registry = AgentRepository(pool)
    invocations = Invocations()
    state = _State()
    validators: dict[str, tuple[bytes, SchemaValidator]] = {}  # per agent, while its schema holds

    async def opened(nc: NATS) -> None:
        state.nc = nc
        await invocations.open(nc)

    def validator(agent_id: str, schema: dict[str, Any]) -> SchemaValidator:
        digest = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        cached = validators.get(agent_id)
        if cached is None or cached[0] != digest:
            if len(validators) > 1000:
                validators.clear()
            cached = validators[agent_id] = (digest, SchemaValidator(schema))
        return cached[1]

    async def invoke(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if not ctx.team_id or not ctx.agent_id:
            raise ToolError("the call carries no team or agent")
        assert state.nc is not None
        target: str = args["agent_id"]
        chain, run_id, deadline = [ctx.agent_id], ctx.run_id, ctx.deadline
        if "invocation_id" in args:
            parent = await invocations.get(args["invocation_id"])
            if parent is None or parent.team_id != ctx.team_id or parent.callee != ctx.agent_id:
                raise InvalidInvocation("invocation_id names no open invocation of yours (it may "
                                        "have ended)")
            chain = [*parent.chain, ctx.agent_id]
            run_id = run_id or parent.run_id
            deadline = min(deadline, parent.deadline)
        elif await invocations.serving(ctx.team_id, ctx.agent_id):
            raise InvocationRequired("you are inside an invocation: name its invocation_id to "
                                     "invoke further agents (a new chain would escape the depth "
                                     "and cycle checks)")
        if target in chain:
            raise AgentCycle(f"agent {target} is already in this invocation chain "
                             f"({' > '.join(chain)}): a cycle")
        if len(chain) > settings.max_depth:
            raise AgentDepthExceeded(f"invoking {target} would make the chain {len(chain) + 1} "
                                     f"agents long; at most {settings.max_depth} invocations deep")
        record = await registry.get(ctx.team_id, target)
        if record is None:
            raise NotFound(f"no agent {target!r} is registered in your team")
        error = validator(target, record.input_schema).problem(args["input"])
        if error is not None:
            raise InvalidInput(f"input does not match {target}'s input schema at "
                               f"{error.json_path}: {error.message[:200]}")
        remaining = deadline - time.time() - _MARGIN_S
        if remaining <= 0:
            raise AgentTimeout("no time is left for the invocation")
        invocation = Invocation(invocation_id=new_invocation_id(), team_id=ctx.team_id, callee=target,
                                chain=chain, run_id=run_id, deadline=deadline)
        request = AgentRequest(input=args["input"], invocation_id=invocation.invocation_id,
                               team_id=ctx.team_id, caller=ctx.agent_id, chain=chain, depth=len(chain),
                               run_id=run_id, call_id=ctx.call_id, confidential=ctx.confidential,
                               deadline_ms=int(deadline * 1000))
        headers = {p.H_CALL_ID: ctx.call_id, p.H_TEAM_ID: ctx.team_id, p.H_AGENT_ID: ctx.agent_id,
                   p.H_DEADLINE: str(int(deadline * 1000)), H_AGENT_CHAIN: ",".join(chain),
                   H_INVOCATION_ID: invocation.invocation_id}
        if run_id:
            headers[p.H_RUN_ID] = run_id
        await invocations.put(invocation)
        try:
            msg = await state.nc.request(agent_subject(target), request.model_dump_json().encode(),
                                         timeout=remaining, headers=headers)
        except NoRespondersError:
            raise AgentUnavailable(f"agent {target} is not running") from None
        except NatsTimeout:
            raise AgentTimeout(f"agent {target} did not answer in time") from None
        finally:
            await invocations.end(invocation)
        reply = _reply(target, msg.data)
        if not reply.ok:
            assert reply.error is not None
            raise AgentFailed(f"agent {target} failed ({reply.error.code}): {reply.error.message}")
        log.info("agent_invoked", target=target, depth=len(chain), tokens=reply.usage.tokens)
        return ToolResult(
            output={"agent_id": target, "output": reply.output or {},
                    "invocation_id": invocation.invocation_id, "depth": len(chain)},
            tokens_used=reply.usage.tokens,
            compute_units=reply.usage.cost_1t,
            object_refs=[{"type": "agent_invocation", "id": invocation.invocation_id,
                          "agent_id": target, "chain": chain}],
        )

    return ResourcefulService(name="agent", tools=[ToolDef(manifest=MANIFEST, handler=invoke)],
                              opened=[opened])


def _reply(target: str, data: bytes) -> AgentReply:
    """The callee's reply, or agent_bad_reply: bounded, well-formed, a NUL-free JSON object."""
    if len(data) > MAX_REPLY_BYTES:
        raise AgentBadReply(f"agent {target}'s reply exceeds {MAX_REPLY_BYTES} bytes")
    try:
        reply = AgentReply.model_validate_json(data)
    except ValidationError:
        raise AgentBadReply(f"agent {target}'s reply is not an agent reply") from None
    if reply.ok is False and reply.error is None:
        raise AgentBadReply(f"agent {target} failed without saying why")
    if reply.ok and reply.output is not None and _OUTPUT.problem(reply.output) is not None:
        raise AgentBadReply(f"agent {target}'s output is not a bounded JSON object without NUL "
                            "characters")
    return reply
