"""The stateless era (2026-07-28): checks of the per-request envelope and its routing headers.

No initialize and no session: each POST carries its protocol version and client capabilities
in `params._meta`, mirrored in the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers so
intermediaries can route without reading the body. The ladder (first failure wins) follows
the SDK's: envelope keys present, headers agree with the body, version served.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from proxy.web.mcp.protocol import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MODERN_VERSIONS,
    McpError,
    Message,
    unsupported_version,
)

VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                # the tasks extension: Mcp-Name carries the task id (routing to its state)
                "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
_ROUTING = {VERSION_HEADER.lower(), METHOD_HEADER.lower(), NAME_HEADER.lower()}
_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=")
_SAFE = re.compile(r"[\x20-\x7E]*")


def encode_header_value(value: str) -> str:
    """A value as a header carries it: printable ASCII verbatim, anything else base64-wrapped."""
    if _SAFE.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def decode_header_value(value: str | None) -> str | None:
    if value is None:
        return None
    m = _SENTINEL.fullmatch(value)
    if m is None:
        return value
    try:
        raw = base64.b64decode(m.group("payload"), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def routing_headers(method: str, params: Mapping[str, Any] | None, version: str) -> dict[str, str]:
    """The headers a client sends with a stateless-era request (used by the stdio bridge)."""
    headers = {VERSION_HEADER: version, METHOD_HEADER: method}
    key = NAME_BEARING.get(method)
    if key is not None and params is not None and isinstance(params.get(key), str):
        headers[NAME_HEADER] = encode_header_value(params[key])
    return headers


def envelope_version(params: Mapping[str, Any] | None) -> Any:
    meta = (params or {}).get("_meta")
    return meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, Mapping) else None


def check_routing(msg: Message, headers: Mapping[str, str], *, name_required: bool) -> None:
    """Routing headers agree with the body before anything acts on them: Mcp-Method names
    the method; Mcp-Name carries the method's name-bearing parameter (a tool's name, a task's
    id). `name_required`: the stateless era requires it
    where the parameter is given; the handshake era checks it only when a client sends it."""
    method = headers.get(METHOD_HEADER)
    if method is not None and method != msg.method:
        raise McpError(HEADER_MISMATCH, f"{METHOD_HEADER} does not match the method", http_status=400)
    name = headers.get(NAME_HEADER)
    key = NAME_BEARING.get(msg.method)
    if key is None:  # nothing to route by: the header, if any, is ignored (as the SDK does)
        return
    value = (msg.params or {}).get(key)
    # The tasks extension asks clients to send Mcp-Name with tasks/*, but clients of its first
    # release (fastmcp-tasks 4.1) do not: there it is checked when present.
    if value is None or (name is None and (not name_required or msg.method.startswith("tasks/"))):
        return
    if decode_header_value(name) != value:
        raise McpError(HEADER_MISMATCH, f"{NAME_HEADER} does not match the request's {key}",
                       http_status=400)


def check_request(msg: Message, headers: Mapping[str, str], raw_headers: Iterable[tuple[str, str]]) -> str:
    """The request's protocol version, or the McpError of the first rung that fails."""
    seen: set[str] = set()
    for name, _ in raw_headers:
        key = name.lower()
        if key in _ROUTING:
            if key in seen:
                raise McpError(HEADER_MISMATCH, f"{name} header appears more than once", http_status=400)
            seen.add(key)
    meta = (msg.params or {}).get("_meta")
    if not isinstance(meta, Mapping):
        raise McpError(INVALID_PARAMS, "params._meta must be an object carrying the "
                       f"{PROTOCOL_VERSION_META_KEY!r} and {CLIENT_CAPABILITIES_META_KEY!r} keys",
                       http_status=400)
    missing = [k for k in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if k not in meta]
    if missing:
        raise McpError(INVALID_PARAMS, f"params._meta lacks {', '.join(missing)}", http_status=400)
    version = meta[PROTOCOL_VERSION_META_KEY]
    if headers.get(VERSION_HEADER) != version:
        raise McpError(HEADER_MISMATCH, f"{VERSION_HEADER} does not match the envelope's version",
                       http_status=400)
    if headers.get(METHOD_HEADER) != msg.method:
        raise McpError(HEADER_MISMATCH, f"{METHOD_HEADER} does not match the method", http_status=400)
    check_routing(msg, headers, name_required=True)
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version)
    return str(version)
