"""One plugin call's internal() requests: checked against the plugin's declared permissions,
then relayed to the proxy replica running the call, whose pipeline runs them."""

from __future__ import annotations

import json
import time
from typing import Any

from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout
from pydantic import ValidationError

from services.plugins.errors import PLUGIN_FORBIDDEN
from services.plugins.manifest import PluginManifest
from wire.plugins import service_of, unsafe_value
from wire import protocol as p
from wire.manifest import is_valid_tool_name
from services.sdk.service import CallContext

MAX_REQUEST_CHARS = 1 << 20


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "message": message[:1000]}


class InternalCalls:
    """The host side of `internal(tool, args)` / `internal(service, tool, args)`.

    A request naming a service the plugin did not declare, a plugin tool, or anything the
    proxy refuses (policy, an approval it would need) sets `forbidden`: the plugin's call
    then ends with plugin_forbidden whatever the plugin does with the error it sees."""

    def __init__(self, nc: NATS, *, plugin: PluginManifest, ctx: CallContext, deadline: float,
                 max_calls: int) -> None:
        self._nc = nc
        self._plugin = plugin
        self._ctx = ctx
        self._deadline = deadline
        self._max_calls = max_calls
        self.calls = 0
        self.forbidden: str | None = None

    def _refuse(self, message: str) -> dict[str, Any]:
        if self.forbidden is None:
            self.forbidden = message
        return _error(PLUGIN_FORBIDDEN, message)

    async def __call__(self, request: Any) -> dict[str, Any]:
        if self.forbidden is not None:
            return self._refuse(self.forbidden)
        if not isinstance(request, str) or len(request) > MAX_REQUEST_CHARS:
            return _error("invalid_args", "internal() arguments are too large")
        try:
            service, tool, args = json.loads(request)
        except (ValueError, TypeError):
            return _error("invalid_args", "internal(tool, args) or internal(service, tool, args)")
        if not isinstance(tool, str) or not is_valid_tool_name(tool):
            return _error("invalid_args", "internal(): the tool must be a catalog tool name")
        if not isinstance(args, dict):
            return _error("invalid_args", "internal(): args must be an object")
        problem = unsafe_value(args)
        if problem is not None:
            return _error("invalid_args", f"internal(): args hold {problem}")
        if service is not None and (not isinstance(service, str) or service_of(tool) != service):
            return self._refuse(f"internal(): {tool!r} is not a tool of the service {str(service)[:64]!r}")
        service = service_of(tool)
        if service not in self._plugin.internal_api:
            return self._refuse(f"internal(): the plugin did not declare the internal API {service!r}")
        self.calls += 1
        if self.calls > self._max_calls:
            return self._refuse(f"internal(): more than {self._max_calls} internal calls in one call")
        if not self._ctx.replica or not self._ctx.call_id:
            return self._refuse("internal(): this call came from no proxy replica to relay through")
        remaining = self._deadline - time.time()
        if remaining <= 0:
            return _error("timeout", "internal(): the plugin call's deadline has passed")
        body = p.InternalRequest(plugin=self._plugin.name, service=service, tool=tool, args=args)
        try:
            msg = await self._nc.request(
                p.internal_subject(self._ctx.replica), body.model_dump_json().encode(),
                timeout=remaining, headers={p.H_CALL_ID: self._ctx.call_id})
        except NoRespondersError:
            return _error("tool_unavailable", "internal(): the proxy replica of this call is gone")
        except NatsTimeout:
            return _error("timeout", f"internal(): {tool} did not answer before the deadline")
        try:
            reply = p.InternalReply.model_validate_json(msg.data)
        except ValidationError:
            return _error("plugin_error", "internal(): the proxy's reply was not understood")
        if reply.forbidden:
            return self._refuse(f"internal(): {tool}: {reply.message}")
        if reply.ok:
            return {"ok": True, "output": reply.output}
        return _error(reply.code or "tool_error", reply.message)
