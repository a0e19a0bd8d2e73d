"""The catalog entries of task.list, task.get (read) and task.create, task.update,
task.complete, task.assign (write)."""

from __future__ import annotations

from typing import Any

from services.sdk import Cost
from wire.manifest import ToolManifest
from services.sdk.schema import OBJECT, identifier, text, uuid_string, version
from services.sdk.service import make_manifest

STATUSES = ["open", "in_progress", "done"]
LIST_DEFAULT = 50
LIST_MAX = 100
TITLE_MAX = 200
DESCRIPTION_MAX = 4000

_NULLABLE = {"anyOf": [{"type": "string"}, {"type": "null"}]}
TASK_FIELDS: dict[str, Any] = {
    "task_id": {"type": "string"},
    "title": {"type": "string"},
    "description": {"type": "string"},
    "status": {"type": "string", "enum": STATUSES},
    "created_by": {"type": "string"},
    "created_at": {"type": "string"},
    "project_id": _NULLABLE,
    "assignee": _NULLABLE,
    "version": {"type": "integer", "minimum": 1},
    "updated_at": {"type": "string"},
    "completed_at": _NULLABLE,
}
TASK: dict[str, Any] = {"type": "object", "required": list(TASK_FIELDS), "properties": TASK_FIELDS}
_CHANGED: dict[str, Any] = {"type": "object", "required": [*TASK_FIELDS, "changed"],
                            "properties": {**TASK_FIELDS, "changed": {"type": "boolean"}}}
_TITLE = text(TITLE_MAX, non_blank=True)
_DESCRIPTION = text(DESCRIPTION_MAX)
_ASSIGNEE = {**identifier(128), "description": "the agent id to assign"}
_PROJECT = uuid_string("a project of your team")


def _write(tool_id: str, description: str, properties: dict[str, Any],
           any_of: list[str] | None = None, required: tuple[str, ...] = ()) -> ToolManifest:
    schema: dict[str, Any] = {
        **OBJECT,
        "required": ["task_id", "expected_version", *required],
        "properties": {"task_id": uuid_string(), "expected_version": version(), **properties},
    }
    if any_of:
        schema["anyOf"] = [{"required": [k]} for k in any_of]
    return make_manifest({
        "tool_id": tool_id, "category": "B", "action": "write", "description": description,
        "input_schema": schema, "output_schema": _CHANGED, "cost": Cost(per_call=0.0002),
        "network": False,
    })


LIST: ToolManifest = make_manifest({
    "tool_id": "task.list",
    "version": "1.1.0",
    "category": "B",
    "action": "read",
    "description": "List your team's tasks, newest first, optionally filtered by status and "
                   "by project.",
    "input_schema": {
        **OBJECT,
        "properties": {
            "status": {"type": "string", "enum": STATUSES},
            "project_id": _PROJECT,
            "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX},
        },
    },
    "output_schema": {
        "type": "object",
        "required": ["tasks", "count"],
        "properties": {"tasks": {"type": "array", "maxItems": LIST_MAX, "items": TASK},
                       "count": {"type": "integer", "minimum": 0}},
    },
    "cost": Cost(per_call=0.0001),
    "network": False,
})

CREATE: ToolManifest = make_manifest({
    "tool_id": "task.create",
    "version": "1.1.0",
    "category": "B",
    "action": "write",
    "description": "Create an open task for your team, optionally in one of its projects.",
    "input_schema": {
        **OBJECT,
        "required": ["title"],
        "properties": {
            "title": _TITLE,
            "description": _DESCRIPTION,
            "project_id": _PROJECT,
        },
    },
    "output_schema": TASK,
    "cost": Cost(per_call=0.0002),
    "network": False,
})

GET: ToolManifest = make_manifest({
    "tool_id": "task.get",
    "category": "B",
    "action": "read",
    "description": "Read one of your team's tasks (its version is what an update names).",
    "input_schema": {**OBJECT, "required": ["task_id"], "properties": {"task_id": uuid_string()}},
    "output_schema": TASK,
    "cost": Cost(per_call=0.0001),
    "network": False,
})

UPDATE = _write(
    "task.update",
    "Change a task's title, description, status or project (null: none). Name the version you "
    "read (`expected_version`): if it changed since, nothing is written (version_conflict).",
    {"title": _TITLE, "description": _DESCRIPTION, "status": {"enum": STATUSES},
     "project_id": {"anyOf": [_PROJECT, {"type": "null"}]}},
    any_of=["title", "description", "status", "project_id"],
)

COMPLETE = _write(
    "task.complete",
    "Mark a task done (completing a done task changes nothing). A stale expected_version is "
    "version_conflict.",
    {},
)

ASSIGN = _write(
    "task.assign",
    "Assign a task to an agent (null: unassign). A stale expected_version is version_conflict.",
    {"assignee": {"anyOf": [_ASSIGNEE, {"type": "null"}]}},
    required=("assignee",),
)

# In the order the service serves them.
MANIFESTS = (LIST, CREATE, GET, UPDATE, COMPLETE, ASSIGN)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
