"""Portable JSON Schemas: the subset every model API takes as a tool's parameters and every
MCP client takes as a tool's input or output schema.

Model APIs read tool schemas in dialects: OpenAI (strict mode or not), Anthropic, Gemini (a
single-type OpenAPI subset); MCP clients (the Inspector's strict check, fastmcp building
models from output schemas) read them again. A keyword one of them ignores is harmless — the
proxy validates every call against the full schema anyway — but a construct one of them
*refuses* fails the agent's first model request. So a portable schema:

- is an object at every node (no `true`/`false` subschemas; `additionalProperties` may
  still be a boolean: every dialect takes it, OpenAI's strict mode requires `false`);
- names one `type` per node (alternatives, `null` included, are `anyOf` branches);
- composes only with `anyOf` of typed branches (no `oneOf`, `allOf`, `not`,
  `if`/`then`/`else`, dependent or pattern keywords);
- has an object at its root.

A rule across properties at the root (each op's own parameters, "exactly one of content and
content_base64") is part of the tool's contract all the same: the proxy validates every call
against the full schema, and the surfaces a model reads publish the schema without it
(`published`). `published_problems` lists every departure left, with its JSON path: built-in
tools have none (a test walks the whole catalog); plugin tools are checked and reported when
installed, upstream tools when registered.
"""

from __future__ import annotations

from typing import Any

# Every keyword a portable schema may use. Anything else is reported.
ALLOWED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "description", "title", "default", "examples", "format", "pattern", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "$ref", "$defs",
    "$schema", "$id", "$comment",
    # Bounds the keys of an open map (every schema bounds every string, wire/bounds.py). Not
    # among the keywords the strictest dialects list, but an open map is never strict anyway,
    # and a dialect that does not know it ignores it; the proxy checks it on every call.
    "propertyNames",
})
# Root keywords that state a rule across properties (one of two fields, each op's own
# parameters): `published` leaves them out; the proxy still checks them.
_RULES = ("allOf", "oneOf", "anyOf", "not", "if", "then", "else", "dependentRequired",
          "dependentSchemas")
# What to use instead, where there is a portable spelling.
ADVICE = {
    "oneOf": "use anyOf",
    "allOf": "merge the branches, or check the rule in the tool",
    "if": "check the conditional rule in the tool",
    "then": "check the conditional rule in the tool",
    "else": "check the conditional rule in the tool",
    "not": "check the rule in the tool",
    "dependentRequired": "check the rule in the tool",
    "dependentSchemas": "check the rule in the tool",
    "dependencies": "check the rule in the tool",
    "patternProperties": "use additionalProperties with a schema",
    "propertyNames": "bound the keys in the tool (maxProperties bounds their number)",
    "prefixItems": "use items",
    "contains": "check the rule in the tool",
    "unevaluatedProperties": "use additionalProperties",
    "unevaluatedItems": "use items",
    "definitions": "use $defs",
}
TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
MAX_PROBLEMS = 50


def published_problems(schema: Any) -> list[str]:
    """What keeps a tool's schema from being portable once published (root rules left out):
    the check of the whole catalog, of plugin tools at install and upstream tools at
    registration."""
    return problems(published(schema) if isinstance(schema, dict) else schema)


def problems(schema: Any, *, root: bool = True) -> list[str]:
    """Every departure from the portable subset, as `path: what (advice)` lines (empty when
    portable; at most MAX_PROBLEMS)."""
    found: list[str] = []
    if root and (not isinstance(schema, dict) or schema.get("type") != "object"):
        found.append("$: the root must be {\"type\": \"object\", ...}")
    _walk(schema, "$", found)
    return found[:MAX_PROBLEMS]


def root_rules(schema: Any) -> list[str]:
    """The root keywords of `schema` that state a rule across properties — `anyOf` of
    required-only branches ("at least one of these"), `oneOf` ("exactly one"), `allOf` of
    if/then per operation: the proxy checks them on every call, and `published` leaves them
    out (no model API takes them at a tool's root)."""
    if not isinstance(schema, dict):
        return []
    return [k for k in _RULES if k in schema and not (k == "anyOf" and _typed_branches(schema[k]))]


def published(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as model-facing surfaces list it: without its root rules (`root_rules`).
    Everything else is kept as is, so a schema that is portable but for its root rules
    publishes portable."""
    moved = root_rules(schema)
    if not moved:
        return schema
    return {k: v for k, v in schema.items() if k not in moved}


def _typed_branches(branches: Any) -> bool:
    return isinstance(branches, list) and all(isinstance(b, dict) and _typed(b) for b in branches)


def is_portable(schema: Any, *, root: bool = True) -> bool:
    return not problems(schema, root=root)


def _walk(node: Any, path: str, found: list[str]) -> None:
    if len(found) >= MAX_PROBLEMS:
        return
    if isinstance(node, bool):
        found.append(f"{path}: a boolean schema ({str(node).lower()}); use an object schema")
        return
    if not isinstance(node, dict):
        found.append(f"{path}: not a schema object")
        return
    for key in node:
        if key not in ALLOWED:
            advice = ADVICE.get(key)
            found.append(f"{path}: {key} is not portable" + (f" ({advice})" if advice else ""))
    t = node.get("type")
    if isinstance(t, list):
        found.append(f"{path}: type {t} names several types; use anyOf with one type each")
    elif t is not None and t not in TYPES:
        found.append(f"{path}: unknown type {t!r}")
    for name, sub in _dict(node.get("properties")).items():
        _walk(sub, f"{path}.properties.{name}", found)
    for name, sub in _dict(node.get("$defs")).items():
        _walk(sub, f"{path}.$defs.{name}", found)
    extra = node.get("additionalProperties")
    if extra is not None and not isinstance(extra, bool):
        _walk(extra, f"{path}.additionalProperties", found)
    if "items" in node:
        _walk(node["items"], f"{path}.items", found)
    branches = node.get("anyOf")
    if branches is not None:
        if not isinstance(branches, list) or not branches:
            found.append(f"{path}.anyOf: must be a non-empty list")
        else:
            for i, sub in enumerate(branches):
                if isinstance(sub, dict) and not _typed(sub):
                    found.append(f"{path}.anyOf[{i}]: a branch without its own type (anyOf holds "
                                 "alternative types; a rule across properties belongs in the tool)")
                _walk(sub, f"{path}.anyOf[{i}]", found)


def _typed(node: dict[str, Any]) -> bool:
    return any(k in node for k in ("type", "$ref", "const", "enum", "anyOf"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def report(input_schema: Any, output_schema: Any) -> dict[str, Any]:
    """A tool's schemas as published, checked: `{"portable", "problems"}`, each problem with its
    path. Reported (plugins at install, upstream tools with their definitions), not refused:
    the tool works for clients that take its schemas, and the admin decides. No output schema
    publishes as a plain object."""
    found = [f"input_schema{p[1:]}" for p in published_problems(input_schema or {})]
    found += [f"output_schema{p[1:]}" for p in published_problems(output_schema or {"type": "object"})]
    return {"portable": not found, "problems": found}
