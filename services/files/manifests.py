"""The catalog entries of file.list, file.read (read), file.write and file.delete (write)."""

from __future__ import annotations

from typing import Any

from services.files.config import FileSettings
from services.files.media import MEDIA_TYPE_PATTERN
from services.files.paths import PATH_MAX_BYTES
from services.sdk import Cost
from wire.manifest import ToolManifest
from services.sdk.schema import OBJECT, limit, tags
from services.sdk.service import make_manifest

LIST_DEFAULT = 100
LIST_MAX = 500

# What the proxy can refuse itself (400 invalid_args): a leading '/', a '..' segment, NUL,
# a backslash, a control character, more than PATH_MAX_BYTES characters. The service checks
# the rest (services/files/paths.py: bytes, depth, segments, invisible characters).
# (?![^\n]*\n): Python's `$` would also match before a final newline.
PATH_PATTERN = "^(?!/)(?![^\\n]*\\n)(?!(?:.*/)?\\.\\.(?:/|$))[^\\x00-\\x1f\\x7f\\\\]*$"
PATH = {"type": "string", "minLength": 1, "maxLength": PATH_MAX_BYTES, "pattern": PATH_PATTERN}
_MEDIA_TYPE = {"type": "string", "maxLength": 255, "pattern": MEDIA_TYPE_PATTERN}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

_ENTRY = {
    "type": "object",
    "required": ["path", "size", "sha256", "media_type", "tags", "updated_at"],
    "properties": {
        "path": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
        "sha256": _SHA256,
        "media_type": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "updated_at": {"type": "string"},
    },
}


def build(settings: FileSettings) -> dict[str, ToolManifest]:
    """The four entries; their size bounds come from the settings."""
    content_chars = settings.max_bytes  # a character is at least one byte
    base64_chars = 4 * ((settings.max_bytes + 2) // 3)
    write_input: dict[str, Any] = {
        **OBJECT,
        "required": ["path"],
        "properties": {
            "path": PATH,
            "content": {"type": "string", "maxLength": content_chars, "pattern": "^[^\\x00]*$",
                        "description": "the file's text (stored as UTF-8)"},
            "content_base64": {"type": "string", "maxLength": base64_chars,
                               "pattern": "^[A-Za-z0-9+/]*={0,2}$",
                               "description": "the file's bytes, base64 (standard alphabet)"},
            "media_type": _MEDIA_TYPE,
            "tags": tags(),
        },
        # Exactly one of the two contents.
        "oneOf": [{"required": ["content"]}, {"required": ["content_base64"]}],
    }
    return {
        "file.list": make_manifest({
            "tool_id": "file.list",
            "category": "B",
            "action": "read",
            "description": "List your team's files (path order), optionally those whose path "
                           "starts with `prefix` (end it with '/' for one folder).",
            "input_schema": {
                **OBJECT,
                "properties": {
                    "prefix": {**PATH, "minLength": 0},
                    "limit": limit(LIST_DEFAULT, LIST_MAX),
                    "after": {**PATH, "description": "list paths after this one (paging)"},
                },
            },
            "output_schema": {
                "type": "object",
                "required": ["files", "count", "truncated"],
                "properties": {
                    "files": {"type": "array", "maxItems": LIST_MAX, "items": _ENTRY},
                    "count": {"type": "integer", "minimum": 0},
                    "truncated": {"type": "boolean"},
                    "next_after": {"type": "string"},
                },
            },
            "cost": Cost(per_call=0.0001),
            "network": False,
        }),
        "file.read": make_manifest({
            "tool_id": "file.read",
            "category": "B",
            "action": "read",
            "description": "Read one of your team's files. Text comes back as text, other bytes "
                           f"as base64; a file over {settings.inline_bytes} bytes comes back as "
                           "an excerpt, with the whole file as an artifact.",
            "input_schema": {**OBJECT, "required": ["path"], "properties": {"path": PATH}},
            "output_schema": {
                "type": "object",
                "required": ["path", "size", "sha256", "media_type", "encoding", "truncated"],
                "properties": {
                    "path": {"type": "string"},
                    "size": {"type": "integer", "minimum": 0},
                    "sha256": _SHA256,
                    "media_type": {"type": "string"},
                    "encoding": {"enum": ["utf-8", "base64"]},
                    "content": {"type": "string"},
                    "excerpt": {"type": "string"},
                    "truncated": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "updated_at": {"type": "string"},
                    "artifact_id": {"type": "string"},
                },
                "oneOf": [{"required": ["content"]}, {"required": ["excerpt"]}],
            },
            "cost": Cost(per_call=0.0001),
            "network": False,
        }),
        "file.write": make_manifest({
            "tool_id": "file.write",
            "category": "B",
            "action": "write",
            "description": "Create or replace one of your team's files, from text (`content`) or "
                           f"bytes (`content_base64`); at most {settings.max_bytes} bytes. All or "
                           "nothing: a refused write leaves the old file as it was.",
            "input_schema": write_input,
            "output_schema": {
                "type": "object",
                "required": ["path", "size", "sha256", "media_type", "created"],
                "properties": {
                    "path": {"type": "string"},
                    "size": {"type": "integer", "minimum": 0},
                    "sha256": _SHA256,
                    "media_type": {"type": "string"},
                    "created": {"type": "boolean"},
                },
            },
            "cost": Cost(per_call=0.0002),
            "network": False,
        }),
        "file.delete": make_manifest({
            "tool_id": "file.delete",
            "category": "B",
            "action": "write",
            "description": "Delete one of your team's files.",
            "input_schema": {**OBJECT, "required": ["path"], "properties": {"path": PATH}},
            "output_schema": {
                "type": "object",
                "required": ["path", "deleted"],
                "properties": {"path": {"type": "string"}, "deleted": {"const": True}},
            },
            "cost": Cost(per_call=0.0001),
            "network": False,
        }),
    }



# The ids do not depend on the limits: read them off entries built with the defaults (without
# the environment, which the service reads when it starts).
TOOL_IDS = tuple(build(FileSettings.model_construct()))
