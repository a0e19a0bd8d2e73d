"""An agent template's rules (seed 001): a non-blank name, a version that starts at 1 and is
bumped only when the Markdown content changes; name and default profile change freely."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from services.sdk.errors import Invalid

EVENT_UPDATED = "template.updated"


@dataclass(frozen=True, slots=True)
class Template:
    template_id: str
    name: str
    content_md: str
    version: int
    default_profile_id: str


def checked_name(name: str) -> str:
    if not name.strip():
        raise Invalid("a template's name cannot be empty")
    return name


def new_template(template_id: str, name: str, content_md: str, profile: str) -> Template:
    return Template(template_id, checked_name(name), content_md, 1, profile)


@dataclass(frozen=True, slots=True)
class Update:
    before: Template
    after: Template

    @property
    def content_changed(self) -> bool:
        return self.after.content_md != self.before.content_md

    @property
    def changed_fields(self) -> list[str]:
        return [f for f in ("name", "content_md", "default_profile_id")
                if getattr(self.after, f) != getattr(self.before, f)]

    def event(self) -> dict[str, Any]:
        """The template.updated event, as an observation the proxy writes with the call."""
        t = self.after
        return {"kind": "event", "type": EVENT_UPDATED, "refs": {"template_id": t.template_id},
                "payload": {"template_id": t.template_id, "name": t.name, "version": t.version,
                            "previous_version": self.before.version,
                            "content_changed": self.content_changed,
                            "changed": self.changed_fields}}


def updated(t: Template, *, content_md: str | None = None, name: str | None = None,
            default_profile_id: str | None = None) -> Update:
    if content_md is None and name is None and default_profile_id is None:
        raise Invalid("an update changes content_md, name or default_profile_id")
    after = replace(
        t,
        name=checked_name(name) if name is not None else t.name,
        default_profile_id=default_profile_id if default_profile_id is not None else t.default_profile_id,
    )
    if content_md is not None and content_md != t.content_md:
        after = replace(after, content_md=content_md, version=t.version + 1)
    return Update(t, after)
