"""The search service's own tool error codes."""

from __future__ import annotations

from services.sdk.errors import ToolError


class DocumentTooLarge(ToolError):
    """Postgres cannot index the document (its word index would exceed 1 MB); HTTP 413."""

    code = "document_too_large"


class SearchTimeout(ToolError):
    """The search ran past its statement timeout."""

    code = "search_timeout"


class TeamDocumentLimit(ToolError):
    """The team has indexed as many documents as it may."""

    code = "team_document_limit"


class TeamIndexFull(ToolError):
    """The document would bring the team's index over its size bound."""

    code = "team_index_full"
