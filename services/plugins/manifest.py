"""plugin.json (exactly the seed's fields) and tool.json (the catalog metadata beside it),
validated field by field: every refusal names the field it is about."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from services.plugins.errors import ManifestProblem
from wire.categories import CATEGORIES
from wire.portable_schema import report
from wire.manifest import ToolManifest, is_valid_tool_name

PLUGIN_FILE = "plugin.json"
TOOL_FILE = "tool.json"
# semver.org's own expression (no leading zeros, optional pre-release and build).
SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)
SERVICE_RE = re.compile(r"[a-z][a-z0-9_]*", re.ASCII)
ENTRY_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*\.js", re.ASCII)


class _Permissions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    network: StrictBool
    filesystem: StrictBool
    internal_api: list[StrictStr] = Field(max_length=16)


class _PluginJson(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: StrictStr = Field(max_length=64)
    version: StrictStr = Field(max_length=64)
    entry: StrictStr = Field(max_length=200)
    capabilities: list[StrictStr] = Field(min_length=1, max_length=16)
    permissions: _Permissions


class _ToolJson(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tool_id: StrictStr = Field(max_length=64)
    category: Literal["A", "B", "C", "D"]
    action: Literal["read", "write"]
    description: StrictStr = Field(max_length=2_000)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    timeout_ms: int | None = Field(default=None, gt=0)


@dataclass(frozen=True, slots=True)
class PluginManifest:
    name: str
    version: str
    entry: str
    capabilities: tuple[str, ...]
    internal_api: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "entry": self.entry,
            "capabilities": list(self.capabilities),
            "permissions": {"network": False, "filesystem": False,
                            "internal_api": list(self.internal_api)},
        }


def _field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def _first(file: str, exc: ValidationError) -> ManifestProblem:
    err = exc.errors()[0]
    message = "unknown field: only the declared fields are allowed" if err["type"] == "extra_forbidden" \
        else err["msg"]
    return ManifestProblem(file, _field(tuple(err["loc"])), message)


def parse_plugin_json(raw: object, *, known_services: Collection[str]) -> PluginManifest:
    try:
        doc = _PluginJson.model_validate(raw)
    except ValidationError as exc:
        raise _first(PLUGIN_FILE, exc) from None
    p = PLUGIN_FILE
    if not is_valid_tool_name(doc.name):
        raise ManifestProblem(p, "name", "must be a catalog tool name (lowercase words separated by dots)")
    if SEMVER_RE.fullmatch(doc.version) is None:
        raise ManifestProblem(p, "version", "must be a semantic version such as 1.0.0")
    if ENTRY_RE.fullmatch(doc.entry) is None or any(s in (".", "..") for s in doc.entry.split("/")):
        raise ManifestProblem(p, "entry", "must be a relative path to a *.js file in the bundle")
    own = f"tool.{doc.name}.invoke"
    for i, cap in enumerate(doc.capabilities):
        if cap != own:
            raise ManifestProblem(p, f"capabilities[{i}]",
                                  f"{cap[:80]!r} is not this plugin's capability (only {own!r})")
    if len(doc.capabilities) != len(set(doc.capabilities)):
        raise ManifestProblem(p, "capabilities", "lists a capability twice")
    if doc.permissions.network:
        raise ManifestProblem(p, "permissions.network", "must be false: plugins never reach the network")
    if doc.permissions.filesystem:
        raise ManifestProblem(p, "permissions.filesystem", "must be false: plugins never see a filesystem")
    for i, service in enumerate(doc.permissions.internal_api):
        where = f"permissions.internal_api[{i}]"
        if SERVICE_RE.fullmatch(service) is None or len(service) > 64:
            raise ManifestProblem(p, where, "must be an internal service name")
        if service not in known_services:
            raise ManifestProblem(p, where, f"unknown internal API {service!r}")
    if len(doc.permissions.internal_api) != len(set(doc.permissions.internal_api)):
        raise ManifestProblem(p, "permissions.internal_api", "lists a service twice")
    return PluginManifest(name=doc.name, version=doc.version, entry=doc.entry,
                          capabilities=tuple(doc.capabilities),
                          internal_api=tuple(doc.permissions.internal_api))


def unbounded(schema: Any, path: str) -> str | None:
    """The first place of an input schema that leaves a string, array or object unbounded."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "string" and "maxLength" not in schema and "enum" not in schema \
                and "const" not in schema:
            return f"{path}: a string needs maxLength"
        if kind == "array" and "maxItems" not in schema:
            return f"{path}: an array needs maxItems"
        if kind == "object" and schema.get("additionalProperties") is not False:
            return f"{path}: an object needs additionalProperties: false"
        for key, value in schema.items():
            if key in ("enum", "const", "examples", "default"):
                continue
            found = unbounded(value, f"{path}.{key}")
            if found:
                return found
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found = unbounded(value, f"{path}[{i}]")
            if found:
                return found
    return None


def portability(tool: dict[str, Any] | ToolManifest) -> dict[str, Any]:
    """Whether the tool's schemas are portable once published — what every model API and MCP
    client takes (wire/portable_schema.py) — and, where not, each problem with its path.
    Reported at install (and in the listing), not refused: the tool works all the same for
    clients that take its schemas, and the admin decides."""
    doc = tool.model_dump() if isinstance(tool, ToolManifest) else tool
    return report(doc.get("input_schema"), doc.get("output_schema"))


def parse_tool_json(raw: object, plugin: PluginManifest) -> ToolManifest:
    """The plugin's catalog entry: classified like any tool, marked `plugin`, never network."""
    t = TOOL_FILE
    try:
        doc = _ToolJson.model_validate(raw)
    except ValidationError as exc:
        raise _first(t, exc) from None
    if doc.tool_id != plugin.name:
        raise ManifestProblem(t, "tool_id", f"must be the plugin's name {plugin.name!r}")
    limit = CATEGORIES[doc.category].timeout_ms
    if doc.timeout_ms is not None and doc.timeout_ms > limit:
        raise ManifestProblem(t, "timeout_ms", f"exceeds category {doc.category}'s {limit} ms")
    problem = unbounded(doc.input_schema, "input_schema")
    if problem is not None:
        field, _, message = problem.partition(": ")
        raise ManifestProblem(t, field, message)
    fields = doc.model_dump(exclude_none=True)
    fields.update(version=plugin.version, plugin=True, network=False)
    try:
        return ToolManifest.model_validate(fields)
    except ValidationError as exc:
        raise _first(t, exc) from None
