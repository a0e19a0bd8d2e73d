"""The catalog entries of template.list, template.read (read) and template.create,
template.update, template.delete (write): agent templates as seed 001 describes them."""

from __future__ import annotations

from typing import Any

from services.sdk import Cost
from wire.manifest import ToolManifest
from services.sdk.schema import OBJECT, identifier, limit, text, uuid_string, version
from services.sdk.service import make_manifest

NAME_MAX = 200
CONTENT_MAX = 65_536  # characters of Markdown
LIST_DEFAULT = 50
LIST_MAX = 100

_NAME = text(NAME_MAX, non_blank=True)
_CONTENT = {**text(CONTENT_MAX), "description": "the template's Markdown"}
_PROFILE = {**identifier(128), "description": "the profile future agents of this template get"}
_OPTIONAL_VERSION = version("if given, the version you read: a stale one is version_conflict")

SUMMARY_FIELDS: dict[str, Any] = {
    "template_id": {"type": "string"},
    "name": {"type": "string"},
    "version": {"type": "integer", "minimum": 1},
    "default_profile_id": {"type": "string"},
    "updated_at": {"type": "string"},
}
TEMPLATE_FIELDS: dict[str, Any] = {**SUMMARY_FIELDS, "content_md": {"type": "string"}}
TEMPLATE: dict[str, Any] = {"type": "object", "required": list(TEMPLATE_FIELDS),
                            "properties": TEMPLATE_FIELDS}


def _manifest(tool_id: str, action: str, description: str, input_schema: dict[str, Any],
              output_schema: dict[str, Any]) -> ToolManifest:
    return make_manifest({
        "tool_id": tool_id, "category": "B", "action": action, "description": description,
        "input_schema": input_schema, "output_schema": output_schema,
        "cost": Cost(per_call=0.0001 if action == "read" else 0.0002), "network": False,
    })


LIST = _manifest(
    "template.list", "read",
    "List your team's agent templates (most recently updated first), without their content: "
    "read one with template.read.",
    {**OBJECT, "properties": {"limit": limit(LIST_DEFAULT, LIST_MAX)}},
    {"type": "object", "required": ["templates", "count"], "properties": {
        "templates": {"type": "array", "maxItems": LIST_MAX,
                      "items": {"type": "object", "required": list(SUMMARY_FIELDS),
                                "properties": SUMMARY_FIELDS}},
        "count": {"type": "integer", "minimum": 0}}},
)

READ = _manifest(
    "template.read", "read",
    "Read one of your team's agent templates, its Markdown content included.",
    {**OBJECT, "required": ["template_id"], "properties": {"template_id": uuid_string()}},
    TEMPLATE,
)

CREATE = _manifest(
    "template.create", "write",
    "Create an agent template (version 1). Names are unique in a team: a taken one is conflict.",
    {**OBJECT, "required": ["name", "content_md", "default_profile_id"],
     "properties": {"name": _NAME, "content_md": _CONTENT, "default_profile_id": _PROFILE}},
    TEMPLATE,
)

UPDATE = _manifest(
    "template.update", "write",
    "Change a template's content, name or default profile. The version is bumped only when "
    "the content changes. Agents already created from the template are not changed (they "
    "drift until synchronized). With expected_version, a stale version is version_conflict.",
    {**OBJECT, "required": ["template_id"],
     "properties": {"template_id": uuid_string(), "expected_version": _OPTIONAL_VERSION,
                    "content_md": _CONTENT, "name": _NAME, "default_profile_id": _PROFILE},
     "anyOf": [{"required": [k]} for k in ("content_md", "name", "default_profile_id")]},
    {"type": "object", "required": [*TEMPLATE_FIELDS, "changed", "content_changed"],
     "properties": {**TEMPLATE_FIELDS, "changed": {"type": "boolean"},
                    "content_changed": {"type": "boolean"}}},
)

DELETE = _manifest(
    "template.delete", "write",
    "Delete a template. Agents created from it keep their own content. With expected_version, "
    "a stale version is version_conflict.",
    {**OBJECT, "required": ["template_id"],
     "properties": {"template_id": uuid_string(), "expected_version": _OPTIONAL_VERSION}},
    {"type": "object", "required": ["template_id", "deleted"],
     "properties": {"template_id": {"type": "string"}, "deleted": {"const": True}}},
)

# In the order the service serves them.
MANIFESTS = (LIST, READ, CREATE, UPDATE, DELETE)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
