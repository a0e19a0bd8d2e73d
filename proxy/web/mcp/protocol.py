"""JSON-RPC framing for MCP: served protocol revisions, error codes, the typed protocol error,
and the shape of one incoming message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import jsonrpc as codes

# The handshake era (initialize + Mcp-Session-Id) over streamable HTTP exists from 2025-03-26;
# 2026-07-28 is the stateless era (server/discover, a per-request envelope in params._meta).
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
SUPPORTED_VERSIONS = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)
BATCH_VERSIONS = ("2025-03-26",)  # JSON-RPC batches were removed in 2025-06-18
MAX_BATCH = 16
MAX_ID_CHARS = 256

PARSE_ERROR = codes.PARSE_ERROR
INVALID_REQUEST = codes.INVALID_REQUEST
METHOD_NOT_FOUND = codes.METHOD_NOT_FOUND
INVALID_PARAMS = codes.INVALID_PARAMS
INTERNAL_ERROR = codes.INTERNAL_ERROR
HEADER_MISMATCH = codes.HEADER_MISMATCH
UNSUPPORTED_PROTOCOL_VERSION = codes.UNSUPPORTED_PROTOCOL_VERSION

# The HTTP status a JSON-RPC error travels with in the stateless era (the SDK's table);
# the handshake era answers JSON-RPC errors with 200.
MODERN_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

RequestId = str | int


class McpError(Exception):
    """A JSON-RPC error; `http_status` is set where the transport owes a specific status."""

    def __init__(self, code: int, message: str, data: Any = None, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status

    def error(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def unsupported_version(requested: object) -> McpError:
    return McpError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                    {"supported": list(SUPPORTED_VERSIONS), "requested": str(requested)[:64]},
                    http_status=400)


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, exc: McpError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": exc.error()}


@dataclass(frozen=True, slots=True)
class Message:
    kind: Literal["request", "notification", "response"]
    id: RequestId | None
    method: str
    params: dict[str, Any] | None


def parse_message(obj: object) -> Message:
    """One JSON-RPC 2.0 message; anything else is INVALID_REQUEST (with the id where readable)."""
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        raise McpError(INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    has_id = "id" in obj
    raw_id = obj.get("id")
    if has_id and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        raise McpError(INVALID_REQUEST, "id must be a string or an integer")
    if isinstance(raw_id, str) and len(raw_id) > MAX_ID_CHARS:
        raise McpError(INVALID_REQUEST, f"id is longer than {MAX_ID_CHARS} characters")
    if isinstance(raw_id, int) and not -(2**63) <= raw_id < 2**63:
        raise McpError(INVALID_REQUEST, "id is an integer beyond 64 bits")
    if "method" not in obj:
        if has_id and ("result" in obj or "error" in obj):
            return Message("response", raw_id, "", None)
        raise McpError(INVALID_REQUEST, "a request needs a method")
    method = obj["method"]
    if not isinstance(method, str) or not 0 < len(method) <= 128:
        raise McpError(INVALID_REQUEST, "method must be a non-empty string")
    params = obj.get("params")
    if params is not None and not isinstance(params, dict):
        raise McpError(INVALID_REQUEST, "params must be an object")
    return Message("request" if has_id else "notification", raw_id, method, params)


def readable_id(obj: object) -> RequestId | None:
    """The id of a message that failed to parse, when it is usable in the error reply: an id
    too long (or too large) to be one is answered null, never echoed."""
    if isinstance(obj, dict):
        raw = obj.get("id")
        if isinstance(raw, str) and len(raw) <= MAX_ID_CHARS:
            return raw
        if isinstance(raw, int) and not isinstance(raw, bool) and -(2**63) <= raw < 2**63:
            return raw
    return None
