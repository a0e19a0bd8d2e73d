"""The agent side of agent.invoke: serve `agents.<agent_id>.invoke` (a queue group, so an
agent scales like a service) with an async handler. The handler gets the request (input,
chain, invocation id, run id, deadline) and returns an output, or an AgentReply to report
usage; it raises AgentError to fail with its own code. Its tool calls go to the proxy with
the agent's own token: the caller's rights never travel with the request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from services.agents.protocol import (
    AgentFailure,
    AgentReply,
    AgentRequest,
    agent_queue,
    agent_subject,
    is_agent_id,
)
from wire.protocol import respond

log = structlog.get_logger("toolproxy.agent")

AgentHandler = Callable[[AgentRequest], Awaitable["dict[str, Any] | AgentReply"]]


class AgentError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class AgentRuntime:
    def __init__(self, agent_id: str, handler: AgentHandler) -> None:
        if not is_agent_id(agent_id):
            raise ValueError(f"not an agent id: {agent_id!r}")
        self.agent_id = agent_id
        self._handler = handler
        self._sub: Subscription | None = None
        self._nc: NATS | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, nc: NATS) -> None:
        self._nc = nc
        self._sub = await nc.subscribe(agent_subject(self.agent_id), queue=agent_queue(self.agent_id),
                                       cb=self._on_msg)
        await nc.flush()

    async def stop(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # the connection is already closed
                pass
            self._sub = None
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _on_msg(self, msg: Msg) -> None:
        task = asyncio.create_task(self._handle(msg))  # one slow invocation never blocks the next
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, msg: Msg) -> None:
        try:
            request = AgentRequest.model_validate_json(msg.data)
        except ValidationError:
            reply = AgentReply(ok=False, error=AgentFailure(code="bad_request", message="not an agent request"))
        else:
            reply = await self._run(request)
        try:
            assert self._nc is not None
            await respond(self._nc, msg, orjson.dumps(reply.model_dump(mode="json")))
        except Exception as exc:
            log.warning("agent_reply_failed", agent_id=self.agent_id, error=str(exc))

    async def _run(self, request: AgentRequest) -> AgentReply:
        try:
            result = await self._handler(request)
        except AgentError as exc:
            return AgentReply(ok=False, error=AgentFailure(code=exc.code, message=exc.message[:1000]))
        except Exception:
            log.exception("agent_crashed", agent_id=self.agent_id)
            return AgentReply(ok=False, error=AgentFailure(code="agent_crashed", message="the agent failed"))
        return result if isinstance(result, AgentReply) else AgentReply(ok=True, output=result)
