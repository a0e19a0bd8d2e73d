"""Each tool's per-manifest work, done once: its arguments' checker, its output's validator and
its view in the policy input; and the checks before a call exists (name, then arguments)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.core.args.checker import ArgsChecker
from proxy.core.catalog import Catalog
from proxy.errors import InvalidRequest, UnknownTool
from wire.manifest import ToolManifest, is_valid_tool_name
from wire.validation import SchemaValidator


@dataclass(frozen=True, slots=True)
class PreparedTool:
    manifest: ToolManifest
    args: ArgsChecker
    output: SchemaValidator
    view: dict[str, Any]  # the tool as the policy input shows it


class Prepared:
    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        # Per manifest object (a catalog change replaces the object): built once instead of on
        # every call.
        self._tools: dict[str, PreparedTool] = {}

    def of(self, m: ToolManifest) -> PreparedTool:
        cached = self._tools.get(m.tool_id)
        if cached is None or cached.manifest is not m:
            cached = PreparedTool(m, ArgsChecker(m), SchemaValidator(m.output_schema),
                                  m.model_dump(mode="json"))
            self._tools[m.tool_id] = cached
        return cached

    def resolve(self, name: str) -> ToolManifest:
        """Name shape first (no wildcard, path or look-alike reaches the catalog), then catalog."""
        if not is_valid_tool_name(name):
            raise InvalidRequest(
                "tool name must be lowercase ASCII words separated by dots, at most 64 chars"
            )
        manifest = self._catalog.get(name)
        if manifest is None:
            raise UnknownTool(f"no tool named {name!r}")
        return manifest

    def check_args(self, manifest: ToolManifest, args: dict[str, Any],
                   body_bytes: int | None = None) -> None:
        """Size bound, then input schema (proxy/core/args): bounded work before anything else."""
        self.of(manifest).args.check(args, body_bytes)
