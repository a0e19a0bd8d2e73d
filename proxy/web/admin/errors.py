"""The admin routes' own API errors (a refused schema, a taken id, a rejected policy or bundle...);
the generic ones (forbidden, not_found, invalid_request) are proxy/errors.py's."""

from __future__ import annotations

from typing import ClassVar

from proxy.errors import ApiError, Conflict, InvalidRequest
from services.upstreams.errors import OPENAPI_CODES


class InvalidSchema(ApiError, ValueError):
    code = "invalid_schema"
    http_status = 400


class AgentIdTaken(Conflict):
    code = "agent_id_taken"


class InvalidHostPattern(InvalidRequest):
    code = "invalid_host_pattern"


class UrlNotAllowed(ApiError):
    """A registered API's base_url netguard does not read, or not a public address."""

    code = "url_not_allowed"
    http_status = 400


class SecretsUnavailable(ApiError):
    """The secret box cannot seal a registered API's secret (no key configured)."""

    code = "secrets_unavailable"
    http_status = 503


class PolicyRejected(ApiError):
    """A policy set without the decision rule, that does not compile, or whose tests fail."""

    code = "policy_invalid"
    http_status = 400


class InvalidBundle(ApiError, ValueError):
    code = "invalid_bundle"
    http_status = 400


class InvalidPlugin(ApiError, ValueError):
    """plugin.json or tool.json refused (the body's `field` names what)."""

    code = "invalid_plugin"
    http_status = 400


class PluginNameTaken(Conflict):
    """The plugin or one of its tools takes a built-in tool's name."""

    code = "plugin_name_taken"


class PluginVersionExists(Conflict):
    code = "plugin_version_exists"


class PluginIsEnabled(Conflict):
    code = "plugin_enabled"


class CommandNotAllowed(ApiError):
    """A stdio upstream's command (or its arguments) outside the operator's allowlist."""

    code = "command_not_allowed"
    http_status = 400


class ToolNameTaken(Conflict):
    """An upstream tool's catalog name, or an upstream's name, that another tool holds."""

    code = "tool_name_taken"


class UpstreamExists(Conflict):
    code = "upstream_exists"


class NotClassifiable(Conflict):
    """A changed or gone upstream tool (approve a changed one), or an approval of a hash that
    is not the current definition's."""

    code = "tool_not_classifiable"


class BridgeUnavailable(ApiError):
    """No upstream bridge is running to sync with (retry once one is)."""

    code = "bridge_unavailable"
    http_status = 503


# A sync's failure is the upstream's, not ours: 424 (the request depended on an action that
# failed), with the same codes a call's ending uses.
class UpstreamUnreachable(ApiError):
    code = "upstream_unavailable"
    http_status = 424


class UpstreamTimedOut(ApiError):
    code = "upstream_timeout"
    http_status = 424


class UpstreamFailed(ApiError):
    """The upstream answered something that is not MCP (malformed, too large, closed early)."""

    code = "upstream_error"
    http_status = 424


class ToolSetLimit(Conflict):
    """The team has as many tool sets as one team may keep."""

    code = "toolset_limit"


class OpenApiRefused(ApiError):
    """An OpenAPI document refused at registration: invalid, an external $ref, too large, too
    deep, recursive, or too many operations (services/upstreams/errors.py's codes)."""

    codes: ClassVar[frozenset[str]] = OPENAPI_CODES
    http_status = 400

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
