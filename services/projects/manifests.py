"""The catalog entries of project.list, project.get (read), project.create, project.update (write)."""

from __future__ import annotations

from typing import Any

from services.sdk import Cost
from wire.manifest import ToolManifest
from services.sdk.schema import OBJECT, limit, text, uuid_string, version
from services.sdk.service import make_manifest

STATUSES = ["active", "on_hold", "completed", "archived"]
NAME_MAX = 200
DESCRIPTION_MAX = 4000
LIST_DEFAULT = 50
LIST_MAX = 100

PROJECT_FIELDS: dict[str, Any] = {
    "project_id": {"type": "string"},
    "name": {"type": "string"},
    "description": {"type": "string"},
    "status": {"enum": STATUSES},
    "version": {"type": "integer", "minimum": 1},
    "created_by": {"type": "string"},
    "created_at": {"type": "string"},
    "updated_at": {"type": "string"},
}
PROJECT: dict[str, Any] = {"type": "object", "required": list(PROJECT_FIELDS),
                           "properties": PROJECT_FIELDS}
_COUNTS = {"type": "object", "required": ["open", "in_progress", "done"],
           "properties": {k: {"type": "integer", "minimum": 0} for k in ("open", "in_progress", "done")}}

LIST: ToolManifest = make_manifest({
    "tool_id": "project.list",
    "category": "B",
    "action": "read",
    "description": "List your team's projects, most recently updated first, optionally by status.",
    "input_schema": {**OBJECT, "properties": {"status": {"enum": STATUSES},
                                              "limit": limit(LIST_DEFAULT, LIST_MAX)}},
    "output_schema": {
        "type": "object",
        "required": ["projects", "count"],
        "properties": {"projects": {"type": "array", "maxItems": LIST_MAX, "items": PROJECT},
                       "count": {"type": "integer", "minimum": 0}},
    },
    "cost": Cost(per_call=0.0001),
    "network": False,
})

GET: ToolManifest = make_manifest({
    "tool_id": "project.get",
    "category": "B",
    "action": "read",
    "description": "Read one of your team's projects, with how many of its tasks are in each status.",
    "input_schema": {**OBJECT, "required": ["project_id"], "properties": {"project_id": uuid_string()}},
    "output_schema": {
        "type": "object",
        "required": [*PROJECT_FIELDS, "task_counts"],
        "properties": {**PROJECT_FIELDS, "task_counts": _COUNTS},
    },
    "cost": Cost(per_call=0.0001),
    "network": False,
})

CREATE: ToolManifest = make_manifest({
    "tool_id": "project.create",
    "category": "B",
    "action": "write",
    "description": "Create an active project for your team (names are unique in a team: "
                   "a taken name is `conflict`).",
    "input_schema": {
        **OBJECT,
        "required": ["name"],
        "properties": {"name": text(NAME_MAX, non_blank=True),
                       "description": text(DESCRIPTION_MAX)},
    },
    "output_schema": PROJECT,
    "cost": Cost(per_call=0.0002),
    "network": False,
})

UPDATE: ToolManifest = make_manifest({
    "tool_id": "project.update",
    "category": "B",
    "action": "write",
    "description": "Change a project's name, description or status. Name the version you read "
                   "(`expected_version`): if it changed since, nothing is written and the call "
                   "fails with version_conflict. Each change bumps the version.",
    "input_schema": {
        **OBJECT,
        "required": ["project_id", "expected_version"],
        "properties": {
            "project_id": uuid_string(),
            "expected_version": version(),
            "name": text(NAME_MAX, non_blank=True),
            "description": text(DESCRIPTION_MAX),
            "status": {"enum": STATUSES},
        },
        "anyOf": [{"required": [k]} for k in ("name", "description", "status")],
    },
    "output_schema": {"type": "object", "required": [*PROJECT_FIELDS, "changed"],
                      "properties": {**PROJECT_FIELDS, "changed": {"type": "boolean"}}},
    "cost": Cost(per_call=0.0002),
    "network": False,
})

__all__ = ["CREATE", "GET", "LIST", "PROJECT", "STATUSES", "UPDATE"]

# In the order the service serves them.
MANIFESTS = (LIST, GET, CREATE, UPDATE)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
