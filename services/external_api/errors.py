"""external_api.call's own tool error codes (a media type it does not read is netguard's
unsupported_content_type)."""

from __future__ import annotations

from services.sdk.errors import ToolError


class ApiNotRegistered(ToolError):
    code = "api_not_registered"


class MethodNotAllowed(ToolError):
    """The method is not one the API was registered with."""

    code = "method_not_allowed"


class ApiMisconfigured(ToolError):
    """The registration's path patterns no longer parse."""

    code = "api_misconfigured"


class PathNotAllowed(ToolError):
    """A path refused outright (external_api/paths.py) or matching none of the API's."""

    code = "path_not_allowed"


class BodyNotAllowed(ToolError):
    """A body on a method that carries none."""

    code = "body_not_allowed"


class CredentialUnavailable(ToolError):
    """The API's credential cannot be read (its sealed value or its file)."""

    code = "secret_unavailable"
