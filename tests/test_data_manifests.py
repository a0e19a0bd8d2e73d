"""The data families' catalog entries: ids, categories and actions as DESIGN.md fixes them, and
every input string and array bounded, every input object closed."""

from __future__ import annotations

from typing import Any

import pytest

from services.files import service as files
from services.projects import service as projects
from services.search import service as search
from services.tasks import service as tasks
from services.templates import service as templates
from wire.manifest import ToolManifest

DESIGN = {
    "search.index": "write", "search.lite": "read",
    "file.list": "read", "file.read": "read", "file.write": "write", "file.delete": "write",
    "project.list": "read", "project.get": "read", "project.create": "write",
    "project.update": "write",
    "task.list": "read", "task.get": "read", "task.create": "write", "task.update": "write",
    "task.complete": "write", "task.assign": "write",
    "template.list": "read", "template.read": "read", "template.create": "write",
    "template.update": "write", "template.delete": "write",
}


def manifests() -> dict[str, ToolManifest]:
    services = [m.service(None) for m in (search, files, projects, tasks, templates)]  # type: ignore[arg-type]
    return {t.tool_id: t for s in services for t in s.manifests}


def unbounded(schema: Any, where: str = "$") -> list[str]:
    """Every place in an input schema that admits an unbounded string or array, or an open object."""
    if not isinstance(schema, dict):
        return []
    found = []
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    closed = "enum" in schema or "const" in schema
    if "string" in kinds and not closed and "maxLength" not in schema:
        found.append(f"{where}: string without maxLength")
    if "array" in kinds and "maxItems" not in schema:
        found.append(f"{where}: array without maxItems")
    if "object" in kinds and schema.get("additionalProperties") is not False:
        found.append(f"{where}: object without additionalProperties: false")
    for key, sub in schema.get("properties", {}).items():
        found += unbounded(sub, f"{where}.{key}")
    if "items" in schema:
        found += unbounded(schema["items"], f"{where}[]")
    for combinator in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(combinator, [])):
            found += unbounded(sub, f"{where}/{combinator}[{i}]")
    return found


def test_the_families_are_exactly_as_designed() -> None:
    got = manifests()
    assert {k: (m.category, m.action) for k, m in got.items()} == {
        k: ("B", action) for k, action in DESIGN.items()}
    for m in got.values():
        assert (m.network, m.requires_approval, m.timeout_ms) == (False, False, 3000), m.tool_id
        assert m.cost.per_call > 0 and m.description and m.output_schema.get("properties"), m.tool_id


@pytest.mark.parametrize("tool_id", sorted(DESIGN))
def test_every_input_is_bounded_and_closed(tool_id: str) -> None:
    assert unbounded(manifests()[tool_id].input_schema) == []


def test_the_checker_finds_what_it_looks_for() -> None:
    assert unbounded({"type": "object", "properties": {"a": {"type": "string"},
                                                       "b": {"type": "array", "items": {}}}}) == [
        "$: object without additionalProperties: false", "$.a: string without maxLength",
        "$.b: array without maxItems"]
