"""Stable error codes of plugin calls and of the sandbox; the problems of a bundle or manifest."""

from __future__ import annotations

from typing import ClassVar

from services.sdk.errors import ToolError

PLUGIN_TIMEOUT = "plugin_timeout"
PLUGIN_MEMORY = "plugin_memory"
PLUGIN_ERROR = "plugin_error"
PLUGIN_FORBIDDEN = "plugin_forbidden"


class PluginFailure(ToolError):
    """A plugin call that ended badly, with one of the four plugin codes (the sandbox decides
    which at run time, so each failure carries its own)."""

    codes: ClassVar[frozenset[str]] = frozenset(
        {PLUGIN_TIMEOUT, PLUGIN_MEMORY, PLUGIN_ERROR, PLUGIN_FORBIDDEN})

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


class SandboxUnavailable(Exception):
    """A sandbox worker refused to serve: the confinement asked for (its syscall filter under
    TOOLPROXY_PLUGIN_SECCOMP=required) cannot be had on this host."""

    code = "sandbox_unavailable"


class BundleError(ValueError):
    """A bundle that cannot be read safely (bad archive, unsafe path, link, too large)."""

    code = "invalid_bundle"


class ManifestProblem(ValueError):
    """plugin.json or tool.json refused; `field` names what is wrong."""

    code = "invalid_plugin"

    def __init__(self, file: str, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file = file
        self.field = field
