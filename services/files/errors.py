"""The file service's own tool error codes."""

from __future__ import annotations

from services.sdk.errors import ToolError


class InvalidPath(ToolError):
    """A path that could escape or mislead (services/files/paths.py says which); HTTP 400."""

    code = "invalid_path"


class InvalidContent(ToolError):
    """Content that is not what it says (text that is not Unicode, base64 that is not); 400."""

    code = "invalid_content"


class FileTooLarge(ToolError):
    """One file over TOOLPROXY_FILE_MAX_BYTES; HTTP 413."""

    code = "file_too_large"


class TeamFileLimit(ToolError):
    """The team stores as many files as it may."""

    code = "team_file_limit"


class TeamStorageFull(ToolError):
    """The write would bring the team's storage over its size bound."""

    code = "team_storage_full"
