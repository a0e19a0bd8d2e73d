"""Tool names on the model-facing surfaces (OpenAI tools, and MCP's tools/list by default),
mapped reversibly: OpenAI function names allow
`[a-zA-Z0-9_-]{1,64}` (no dots); catalog names are dotted lowercase words and never contain a
hyphen. So `.` <-> `-` is a bijection between catalog names and their OpenAI spellings, of the
same length (catalog names are at most 64 characters).

The reverse mapping only spells a name: whatever it yields is then checked like any other tool
name (`Pipeline.resolve_tool`, via `invoke`), so a name that no catalog tool maps to — `a--b`,
`A-b`, `-x` — is refused there, never looked up as something else.
"""

from __future__ import annotations

import re

from proxy.errors import InvalidRequest

OPENAI_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}", re.ASCII)


def to_openai(tool_id: str) -> str:
    return tool_id.replace(".", "-")


def to_catalog(name: str) -> str:
    """A tool name as a caller may give it on a model-facing surface (MCP): the portable
    spelling (`task-list`) or the catalog's own (`task.list`). Catalog names have no hyphen,
    so a hyphen always means the portable spelling."""
    return from_openai(name) if "-" in name else name


def from_openai(name: str) -> str:
    if not OPENAI_NAME_RE.fullmatch(name):
        raise InvalidRequest(
            "a function name on this surface is 1-64 chars of a-z A-Z 0-9 _ - "
            "(the catalog's dots are spelled '-')"
        )
    return name.replace("-", ".")
