"""An upstream tool's definition as governance pins it: the fields hashed, the catalog name,
and the signs of a description written to steer the model rather than describe the tool."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from wire.manifest import TOOL_NAME_MAX, is_valid_tool_name

# What a pin covers (the list): any change to one of these is a change to the tool.
PINNED_FIELDS = ("name", "title", "description", "input_schema", "output_schema", "annotations")
MAX_DEFINITION_BYTES = 256 * 1024  # one tool's definition, as JSON; a larger one is refused
MCP_NAME_MAX = 128

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")

# Sentences aimed at the model, not at a reader of the tool's purpose (tool poisoning): shown to
# governance as a flag beside the text; such a tool never gets a suggested classification.
_STEERING = [re.compile(p, re.IGNORECASE) for p in (
    r"\bignore (all |any )?(previous|prior|above|other) (instructions|tools|messages)",
    r"\b(you|the (assistant|model|ai|agent)) (must|should|have to|need to) (always|never|first|not)\b",
    r"\bbefore (using|calling) (this|any other) tool\b",
    r"<\s*(important|system|instructions?)\s*>",
    r"\bdo not (tell|mention|reveal|inform) (the )?user\b",
    r"\b(read|send|include) .{0,40}(~/|\.ssh|id_rsa|\.env|api[_ ]key|password|credentials)\b",
    r"\bsystem prompt\b",
)]


def definition_of(tool: Any) -> dict[str, Any]:
    """The pinned fields of an MCP Tool (an mcp_types.Tool or its JSON), in one shape."""
    raw = tool if isinstance(tool, dict) else tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "name": raw.get("name"),
        "title": raw.get("title"),
        "description": raw.get("description") or "",
        "input_schema": raw.get("inputSchema") or raw.get("input_schema") or {"type": "object"},
        "output_schema": raw.get("outputSchema") or raw.get("output_schema"),
        "annotations": raw.get("annotations"),
    }


def definition_hash(definition: dict[str, Any]) -> str:
    body = {k: definition.get(k) for k in PINNED_FIELDS}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def definition_size(definition: dict[str, Any]) -> int:
    return len(orjson.dumps(definition))


def flags_of(definition: dict[str, Any]) -> list[str]:
    """Why governance must read this definition closely (never why it is refused)."""
    text = " ".join(str(definition.get(k) or "") for k in ("title", "description"))
    text += " " + orjson.dumps(definition.get("input_schema") or {}).decode()
    flags = []
    if any(p.search(text) for p in _STEERING):
        flags.append("instructions_to_model")
    if any(ord(c) in _INVISIBLE for c in text):
        flags.append("invisible_characters")
    return flags


_INVISIBLE = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x202E, 0x202D, 0x2066, 0x2067,
                        0x2068, 0x2069, *range(0xE0000, 0xE0080)})


def suggestion(definition: dict[str, Any], flags: list[str]) -> dict[str, Any] | None:
    """What the upstream's own annotations suggest (only ever a suggestion; none when flagged)."""
    if flags:
        return None
    ann = definition.get("annotations") or {}
    if not isinstance(ann, dict):
        return None
    if ann.get("readOnlyHint") is True:
        return {"action": "read"}
    if ann.get("destructiveHint") is True:
        return {"action": "write", "requires_approval": True}
    return {"action": "write"}


def catalog_name(upstream: str, tool: str) -> str | None:
    """`<upstream>.<tool>` in the catalog's alphabet (lower snake case segments), or None when
    the upstream's name cannot become one (the catalog's bound is TOOL_NAME_MAX, below MCP's 128:
    the OpenAI surface's function names take 64)."""
    word = _NOT_WORD.sub("_", _CAMEL.sub("_", tool).lower()).strip("_")
    if not word or not word[0].isalpha():
        return None
    name = f"{upstream}.{word}"
    if len(name) > TOOL_NAME_MAX or len(name) > MCP_NAME_MAX or not is_valid_tool_name(name):
        return None
    return name
