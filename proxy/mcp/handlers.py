"""The MCP methods, the same in both protocol eras: each request is validated against the
SDK's wire types for its revision, answered, and its result serialized for that revision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import methods as wire
from pydantic import ValidationError

from proxy.approval_flow import ApprovalFlow
from proxy.body import describe as describe_validation
from proxy.envelope import InvokeRequest
from proxy.errors import ApiError
from proxy.identity import Identity
from proxy.mcp.protocol import (
    HANDSHAKE_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LATEST_HANDSHAKE,
    METHOD_NOT_FOUND,
    SUPPORTED_VERSIONS,
    McpError,
)
from proxy.mcp.notices import RESUME_TOOL, resume_arguments, resume_misuse
from proxy.mcp.tools import call_result, tool_list
from proxy.pipeline import Outcome, Pipeline, error_outcome

SERVER_INFO = {"name": "toolproxy", "title": "Toolproxy", "version": "0.1.0"}
CAPABILITIES = {"tools": {"listChanged": False}}
# Optional per-call extras a client may put in tools/call's params._meta.
CONTEXT_META = "toolproxy/context"  # {"agent_run_id", "team_id", "confidential"}
IDEMPOTENCY_META = "toolproxy/idempotency_key"

INSTRUCTIONS = (
    "Toolproxy runs each tool call through an authorization policy before anything executes. "
    "A result with isError explains a denial, a rate limit, a tool error or invalid arguments. "
    "Calls that need a governance approval are held, not run: the result names the call_id; "
    f"once approved, call {RESUME_TOOL} with that call_id to run it exactly once."
)


@dataclass(frozen=True, slots=True)
class Exchange:
    """Who is asking, at which protocol revision."""

    identity: Identity
    version: str


class McpHandlers:
    def __init__(self, pipeline: Pipeline, flow: ApprovalFlow) -> None:
        self.pipeline = pipeline
        self.flow = flow
        self._methods = {
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }

    async def dispatch(self, ex: Exchange, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        handler = self._methods.get(method)
        if handler is None or method == "initialize":
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method}")
        validate(method, ex.version, params)
        result = await handler(ex, params or {})
        return wire.serialize_server_result(method, ex.version, result)

    # --- the handshake ------------------------------------------------------------------

    def initialize(self, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """The negotiated version and the result: the client's version if we speak it, else
        our latest (the client then decides whether to go on)."""
        requested = (params or {}).get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        validate("initialize", version, params)
        result = {"protocolVersion": version, "capabilities": CAPABILITIES,
                  "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}
        return version, wire.serialize_server_result("initialize", version, result)

    # --- methods ------------------------------------------------------------------------

    async def _ping(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _discover(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": CAPABILITIES,
                "instructions": INSTRUCTIONS, "cacheScope": "public", "ttlMs": 0,
                "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}

    async def _list_tools(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("cursor") is not None:  # we never hand out cursors: the list is one page
            raise McpError(INVALID_PARAMS, "unknown cursor")
        try:
            manifests = await self.pipeline.callable_tools(ex.identity)
        except ApiError as exc:  # the PDP could not decide: fail closed, say why
            raise McpError(INTERNAL_ERROR, exc.message, {"code": exc.code}) from None
        # Private: the list depends on who asks. Never cached: grants change at any time.
        return {"tools": tool_list(manifests), "cacheScope": "private", "ttlMs": 0,
                "resultType": "complete"}

    async def _call_tool(self, ex: Exchange, params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        arguments = params.get("arguments") or {}
        if name == RESUME_TOOL:
            return await self._resume(ex, arguments)
        meta = params.get("_meta") or {}
        try:
            request = InvokeRequest.model_validate({
                "tool": name, "args": arguments, "context": meta.get(CONTEXT_META) or {},
                "idempotency_key": meta.get(IDEMPOTENCY_META)})
        except ValidationError as exc:
            raise McpError(INVALID_PARAMS, describe_validation(exc)) from None
        try:
            outcome = await self.pipeline.invoke(ex.identity, request)
        except ApiError as exc:  # refused before a call existed: bad name, team mismatch, ...
            outcome = error_outcome(exc)
        return call_result(outcome, name, manifest=self.pipeline.catalog.get(name))

    async def _resume(self, ex: Exchange, arguments: dict[str, Any]) -> dict[str, Any]:
        parsed = resume_arguments(arguments)
        if parsed is None:
            return call_result(Outcome(400, resume_misuse()), RESUME_TOOL, protocol_errors=False)
        try:
            outcome = await self.flow.resume(ex.identity, *parsed)
        except ApiError as exc:
            outcome = error_outcome(exc)
        return call_result(outcome, RESUME_TOOL, protocol_errors=False)


def validate(method: str, version: str, params: dict[str, Any] | None) -> None:
    """Against the SDK's wire type of this method at this revision (the version gate too)."""
    try:
        wire.validate_client_request(method, version, params)
    except KeyError:
        raise McpError(METHOD_NOT_FOUND, f"Method not found: {method} (protocol {version})") from None
    except ValidationError as exc:
        raise McpError(INVALID_PARAMS, f"invalid params: {describe_validation(exc)}") from None
