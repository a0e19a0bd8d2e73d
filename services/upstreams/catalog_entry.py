"""The catalog entry of a classified upstream tool: governance's classification over the pinned
definition (never the current one), always `network: true`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from services.sdk.errors import ManifestError
from wire.categories import CATEGORIES
from wire.manifest import PIN_PREFIX, ToolManifest

MAX_DESCRIPTION = 2_000


def manifest_for(tool_id: str, pinned_hash: str, pinned: dict[str, Any],
                 classification: dict[str, Any], timeout_ms: int) -> ToolManifest:
    """Raises ManifestError when the pinned definition cannot be a catalog entry (a schema
    that is not a JSON Schema of an object)."""
    category = classification["category"]
    title = pinned.get("title")
    description = str(pinned.get("description") or "")
    if title and title not in description:
        description = f"{title}: {description}"
    fields: dict[str, Any] = {
        "tool_id": tool_id,
        "version": f"{PIN_PREFIX}{pinned_hash[:12]}",
        "category": category,
        "action": classification["action"],
        "network": True,
        "requires_approval": bool(classification.get("requires_approval", False)),
        "description": description[:MAX_DESCRIPTION],
        "input_schema": pinned.get("input_schema") or {"type": "object"},
        "output_schema": pinned.get("output_schema") or {"type": "object"},
        "timeout_ms": min(timeout_ms, CATEGORIES[category].timeout_ms),
    }
    if classification.get("risk"):
        fields["risk"] = classification["risk"]
    if classification.get("cost"):
        fields["cost"] = classification["cost"]
    try:
        return ToolManifest.model_validate(fields)
    except ValidationError as exc:
        raise ManifestError(f"{tool_id}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
