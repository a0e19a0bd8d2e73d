"""Runs plugins' internal() calls through this replica's own pipeline, as the plugin.

The plugin host relays each internal() call to the replica running the plugin's call (its
subject names this replica). Everything about the inner call comes from that running call,
never from the request: the identity `plugin:<name>` in the caller's team, the run, the
deadline, and the approval (inherited only when the plugin's own call was approved). The
plugin's declared internal APIs are checked again here; policy, limits, usage, events and the
decision log apply as to any call."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from proxy.core.call import Call
from proxy.core.pipeline import Pipeline
from proxy.core.plugins.calls import PluginCalls
from proxy.core.plugins.directory import PluginDirectory
from proxy.errors import ApiError
from proxy.identity.identity import Identity
from wire.plugins import service_of, unsafe_value
from wire import protocol as p

log = structlog.get_logger("toolproxy.plugins.relay")

PLUGIN_AGENT_PREFIX = "plugin:"
MAX_CONCURRENT = 256


def plugin_identity(name: str, team_id: str, outer_call_id: str) -> Identity:
    return Identity(agent_id=f"{PLUGIN_AGENT_PREFIX}{name}"[:64], team_id=team_id, role="agent",
                    token_id=f"plugin-call:{outer_call_id}")


def _reply(**fields: Any) -> bytes:
    return p.InternalReply(**fields).model_dump_json().encode()


def _forbidden(message: str) -> bytes:
    return _reply(ok=False, code="plugin_forbidden", message=message, forbidden=True)


class InternalRelay:
    def __init__(self, pipeline: Pipeline, calls: PluginCalls, directory: PluginDirectory,
                 nc: NATS, instance_id: str, *, max_calls: int = 16) -> None:
        self._pipeline = pipeline
        self._calls = calls  # the pipeline's hook keeps it (see app wiring)
        self._directory = directory
        self._nc = nc
        self.subject = p.internal_subject(instance_id)
        self._max_calls = max_calls
        self._sub: Subscription | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self.subject, cb=self._on_msg)

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _on_msg(self, msg: Msg) -> None:
        # One task per request: an inner call must not hold up the next one.
        await self._slots.acquire()
        task = asyncio.create_task(self._handle(msg))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _handle(self, msg: Msg) -> None:
        try:
            body = await self.answer((msg.headers or {}).get(p.H_CALL_ID, ""), msg.data)
        except Exception:
            log.exception("internal_call_failed")
            body = _reply(ok=False, code="internal_error", message="the internal call failed")
        with contextlib.suppress(Exception):
            await p.respond(self._nc, msg, body)

    async def answer(self, call_id: str, data: bytes) -> bytes:
        running = self._calls.get(call_id)
        if running is None:
            return _forbidden("no plugin call with this id is running on this replica")
        try:
            req = p.InternalRequest.model_validate_json(data)
        except ValidationError:
            return _reply(ok=False, code="invalid_args", message="not an internal call request")
        outer = running.call
        if req.plugin != outer.manifest.tool_id:
            return _forbidden("the request names another plugin than the running call's")
        enabled = self._directory.get(req.plugin)
        service = service_of(req.tool)
        if enabled is None or service not in enabled.internal_api or \
                (req.service is not None and req.service != service):
            return _forbidden(f"the plugin may not call the internal API {service!r}")
        running.internal_calls += 1
        if running.internal_calls > self._max_calls:
            return _forbidden(f"more than {self._max_calls} internal calls in one plugin call")
        problem = unsafe_value(req.args)
        if problem is not None:
            return _reply(ok=False, code="invalid_args", message=f"the args hold {problem}")
        try:
            manifest = self._pipeline.resolve_tool(req.tool)
            if manifest.plugin:
                return _forbidden("a plugin's tool is not an internal API")
            self._pipeline.check_args(manifest, req.args)
        except ApiError as exc:
            return _reply(ok=False, code=exc.code, message=exc.message)
        if running.deadline - time.time() <= 0:
            return _reply(ok=False, code="timeout", message="the plugin call's deadline has passed")
        approved = outer.approval is not None and outer.approval.get("state") == "approved" \
            and outer.approval.get("args_match") is True
        inner = Call(
            identity=plugin_identity(req.plugin, outer.identity.team_id, outer.call_id),
            manifest=manifest, args=req.args, agent_run_id=outer.agent_run_id, confidential=False,
            call_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()),
            approval={"state": "approved", "args_match": True} if approved else None,
            parent_call_id=outer.call_id, deadline=running.deadline,
        )
        with self._pipeline.bound(inner):
            outcome = await self._pipeline.run(inner)
        if outcome.ok:
            return _reply(ok=True, output=outcome.output)
        code, message = outcome.code or "tool_error", outcome.message
        if outcome.status == "DENIED" and code == "denied":
            detail = f"denied by policy ({', '.join(map(str, outcome.reasons or []))})"
            return _forbidden(f"{detail}: {message}"[:2000])
        return _reply(ok=False, code=code[:64], message=message[:2000])
