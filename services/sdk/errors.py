"""Errors a tool raises to report its own failure (rendered to the agent as FAILED tool_error)."""

from __future__ import annotations


class ToolError(Exception):
    """A tool's own, expected failure: bad input it could not process, a missing record..."""

    code = "tool_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ManifestError(ValueError):
    """A tool declaration that cannot enter the catalog (unclassified, bad schema, bad name)."""
