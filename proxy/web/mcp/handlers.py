"""The MCP methods, the same in both protocol eras: each request is validated against the
SDK's wire types for its revision, answered, and its result serialized for that revision.
Calls held for approval answer as tasks where the client takes them (proxy/web/mcp/tasks.py,
rendered by proxy/web/mcp/task_wire.py); the tasks/* methods are answered here too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import methods as wire
from pydantic import ValidationError

from proxy.core.approval_flow import ApprovalFlow
from proxy.core.envelope import InvokeRequest
from proxy.core.input_rules import describe as describe_validation
from infra import tracing
from proxy.core.notices import RESUME_TOOL, describe, resume_arguments, resume_misuse
from proxy.core.outcome import Outcome
from proxy.core.pipeline import Pipeline
from proxy.core.tool_names import to_catalog
from proxy.errors import ApiError, NotFound
from proxy.identity.identity import Identity
from proxy.web.mcp import task_wire
from proxy.web.mcp.protocol import (
    HANDSHAKE_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LATEST_HANDSHAKE,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    McpError,
)
from proxy.web.mcp.tasks import McpTasks, TaskEnded
from proxy.web.mcp.tools import call_result, tool_list

SERVER_INFO = {"name": "toolproxy", "title": "Toolproxy", "version": "0.1.0"}
CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": False}}
# Tasks: 2025-11-25 declares task-augmented tools/call and tasks/cancel; 2026-07-28 the
# io.modelcontextprotocol/tasks extension (tasks/get, tasks/update, tasks/cancel).
TASKS_VERSION = "2025-11-25"
LEGACY_TASK_CAPABILITIES = {**CAPABILITIES,
                            "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
MODERN_CAPABILITIES = {**CAPABILITIES, "extensions": {task_wire.EXTENSION: {}}}
# Optional per-call extras a client may put in tools/call's params._meta.
CONTEXT_META = "toolproxy/context"  # {"agent_run_id", "team_id", "confidential"}
IDEMPOTENCY_META = "toolproxy/idempotency_key"

INSTRUCTIONS = (
    "Toolproxy runs each tool call through an authorization policy before anything executes. "
    "A result with isError explains a denial, a rate limit, a tool error or invalid arguments. "
    "Calls that need a governance approval are held, not run. A client that takes MCP tasks "
    "gets a task that completes with the tool's result (or the denial) once governance "
    f"decides; otherwise the result names the call_id: once approved, call {RESUME_TOOL} with "
    "that call_id to run it exactly once."
)


@dataclass(frozen=True, slots=True)
class ToolScope:
    """The tool set an endpoint serves (/mcp/sets/<name>): its tools, and no other."""

    name: str
    tools: frozenset[str]


@dataclass(frozen=True, slots=True)
class Exchange:
    """Who is asking, at which protocol revision; `tasks`: the client takes task results
    (declared at initialize in 2025-11-25, on the request itself in 2026-07-28); `scope`: the
    tool set of the endpoint (None: the whole catalog, /mcp)."""

    identity: Identity
    version: str
    tasks: bool = False
    scope: ToolScope | None = None

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS


class McpHandlers:
    def __init__(self, pipeline: Pipeline, flow: ApprovalFlow, tasks: McpTasks) -> None:
        self.pipeline = pipeline
        self.flow = flow
        self.tasks = tasks
        self._methods = {
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }
        self._task_methods = {
            "tasks/get": self._task_get,
            "tasks/result": self._task_result,
            "tasks/cancel": self._task_cancel,
            "tasks/update": self._task_update,
        }

    async def dispatch(self, ex: Exchange, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        # W3C trace context in params._meta: the call's spans join the client's trace.
        with tracing.joined(_meta_of(params), f"mcp {method}"):
            if method in self._task_methods:
                return await self._task_method(ex, method, params)
            handler = self._methods.get(method)
            if handler is None or method == "initialize":
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {method}")
            validate(method, ex.version, params)
            result = await handler(ex, params or {})
            if task_wire.is_task_result(result):
                return result  # a CreateTaskResult: not the method's usual result type
            return wire.serialize_server_result(method, ex.version, result)

    # --- the handshake ------------------------------------------------------------------

    def initialize(self, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """The negotiated version and the result: the client's version if we speak it, else
        our latest (the client then decides whether to go on)."""
        requested = (params or {}).get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        validate("initialize", version, params)
        capabilities = LEGACY_TASK_CAPABILITIES if version == TASKS_VERSION else CAPABILITIES
        result = {"protocolVersion": version, "capabilities": capabilities,
                  "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}
        return version, wire.serialize_server_result("initialize", version, result)

    @staticmethod
    def client_takes_tasks(version: str, params: dict[str, Any] | None) -> bool:
        """At initialize (2025-11-25): whether the client declared the tasks capability."""
        caps = (params or {}).get("capabilities")
        return version == TASKS_VERSION and isinstance(caps, dict) and isinstance(caps.get("tasks"), dict)

    # --- methods ------------------------------------------------------------------------

    async def _ping(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _discover(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": MODERN_CAPABILITIES,
                "instructions": INSTRUCTIONS, "cacheScope": "public", "ttlMs": 0,
                "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}

    async def _list_tools(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("cursor") is not None:  # we never hand out cursors: the list is one page
            raise McpError(INVALID_PARAMS, "unknown cursor")
        try:
            manifests = await self.pipeline.callable_tools(
                ex.identity, ex.scope.tools if ex.scope is not None else None)
        except ApiError as exc:  # the PDP could not decide: fail closed, say why
            raise McpError(INTERNAL_ERROR, exc.message, {"code": exc.code}) from None
        # Private: the list depends on who asks (the policy filters it). Never cached: grants
        # change at any time.
        listed = tool_list(manifests, tasks=ex.tasks or ex.version == TASKS_VERSION,
                           resume=not ex.tasks)
        return {"tools": listed, "cacheScope": "private", "ttlMs": 0, "resultType": "complete"}

    async def _call_tool(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        arguments = params.get("arguments") or {}
        if name == RESUME_TOOL:
            return await self._resume(ex, arguments)
        meta = params.get("_meta") or {}
        # A task-augmented request (2025-11-25) always answers a task; a client that declared
        # the tasks extension (2026-07-28) gets one when the call is held.
        augmented = ex.version == TASKS_VERSION and isinstance(params.get("task"), dict)
        try:
            tool = to_catalog(name)  # the listed (portable) name or the catalog's own
            request = InvokeRequest.model_validate({
                "tool": tool, "args": arguments, "context": meta.get(CONTEXT_META) or {},
                "idempotency_key": meta.get(IDEMPOTENCY_META)})
        except ValidationError as exc:
            raise McpError(INVALID_PARAMS, describe_validation(exc)) from None
        except ApiError as exc:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name} ({exc.message})",
                           {"code": exc.code}) from None
        if ex.scope is not None and tool not in ex.scope.tools:
            # Outside the endpoint's set: as unknown as a tool the catalog lacks; logged.
            await self.pipeline.refuse_outside(ex.identity, tool, ex.scope.name)
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name}", {"code": "unknown_tool"})
        try:
            outcome = await self.pipeline.invoke(ex.identity, request)
        except ApiError as exc:  # refused before a call existed: bad name, team mismatch, ...
            outcome = Outcome.refused(exc)
        manifest = self.pipeline.catalog.get(tool)
        if augmented or (ex.modern and ex.tasks and outcome.status == "AUTHORIZATION_REQUIRED"):
            if outcome.call_id is None or outcome.refusal is not None:
                # Refused before a call existed: no task to make; the error says why.
                call_result(outcome, name, manifest=manifest)  # unknown tool / bad request raise
                raise McpError(INVALID_PARAMS, describe(outcome, tool), {"code": outcome.code})
            state = await self.tasks.state(ex.identity, outcome.call_id)
            return task_wire.created(ex, state, outcome)
        return call_result(outcome, name, manifest=manifest)

    # --- tasks ------------------------------------------------------------------------

    async def _task_method(self, ex: Exchange, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if ex.modern:
            if method == "tasks/result":
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (protocol {ex.version})")
            if not ex.tasks:
                raise task_wire.missing_capability()
        elif ex.version != TASKS_VERSION or method == "tasks/update":
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (protocol {ex.version})")
        task_id = task_wire.task_id_of(params)
        try:
            return await self._task_methods[method](ex, task_id, params or {})
        except NotFound:
            raise McpError(INVALID_PARAMS, "Failed to retrieve task: Task not found") from None
        except TaskEnded as exc:
            raise McpError(INVALID_PARAMS, str(exc)) from None
        except ApiError as exc:
            raise McpError(INTERNAL_ERROR, exc.message, {"code": exc.code}) from None

    async def _task_get(self, ex: Exchange, task_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return task_wire.detailed(ex, await self.tasks.state(ex.identity, task_id), self._manifest)

    async def _task_result(self, ex: Exchange, task_id: str, params: dict[str, Any]) -> dict[str, Any]:
        state = await self.tasks.wait(ex.identity, task_id)
        if not state.terminal:
            raise McpError(INTERNAL_ERROR, f"The task is still {state.status} after waiting: "
                           f"{state.message} Poll tasks/get and ask again.")
        return task_wire.payload(state, self._manifest)

    async def _task_cancel(self, ex: Exchange, task_id: str, params: dict[str, Any]) -> dict[str, Any]:
        state = await self.tasks.cancel(ex.identity, task_id)
        return task_wire.cancelled(ex, state)

    async def _task_update(self, ex: Exchange, task_id: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.tasks.state(ex.identity, task_id)  # it exists and is the caller's
        # A held call never asks its client for input: any response is for no outstanding key.
        return {"resultType": "complete"}

    def _manifest(self, tool: str | None) -> Any:
        return self.pipeline.catalog.get(tool) if tool else None

    async def _resume(self, ex: Exchange, arguments: dict[str, Any]) -> dict[str, Any]:
        parsed = resume_arguments(arguments)
        if parsed is None:
            return call_result(Outcome.refused(resume_misuse()), RESUME_TOOL, protocol_errors=False)
        try:
            outcome = await self.flow.resume(ex.identity, *parsed)
        except ApiError as exc:
            outcome = Outcome.refused(exc)
        return call_result(outcome, RESUME_TOOL, protocol_errors=False)


def _meta_of(params: dict[str, Any] | None) -> dict[str, Any]:
    meta = (params or {}).get("_meta")
    return meta if isinstance(meta, dict) else {}


def validate(method: str, version: str, params: dict[str, Any] | None) -> None:
    """Against the SDK's wire type of this method at this revision (the version gate too)."""
    try:
        wire.validate_client_request(method, version, params)
    except KeyError:
        raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (protocol {version})") from None
    except ValidationError as exc:
        raise McpError(INVALID_PARAMS, f"invalid params: {describe_validation(exc)}") from None
