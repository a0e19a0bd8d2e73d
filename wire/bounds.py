"""Bounds of a tool's input schema: what it leaves unbounded, the most bytes a valid input can
take as compact JSON, and a copy of the schema that checks sizes before contents."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

# A string's code point costs at most 6 bytes of JSON (a control character escaped as \u00XX).
_BYTES_PER_CHAR = 6
_SCALAR_BYTES = {"boolean": 5, "null": 4, "number": 24, "integer": 20}
# Size keywords first: jsonschema applies a schema's keywords in their order, so a list of
# 60,000 items is refused by maxItems before a single item is looked at.
_SIZE_FIRST = ("type", "maxLength", "maxItems", "maxProperties", "additionalProperties",
               "propertyNames")
# An error from one of these is reported at once, nothing else looked at; otherwise the most
# relevant of the first few errors (best_match over all of them would walk every item of an
# invalid 60,000-entry list).
_REPORT_AT_ONCE = frozenset({"maxLength", "maxItems", "maxProperties", "additionalProperties",
                             "type"})
_ERRORS_CONSIDERED = 16
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "propertyNames", "contains", "not", "if",
                  "then", "else", "unevaluatedItems", "unevaluatedProperties")


def _types(node: dict[str, Any]) -> list[str]:
    t = node.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


def unbounded(schema: Any, path: str = "$") -> list[str]:
    """Where a valid instance may grow without limit: strings without maxLength, arrays without
    maxItems, objects open to any key, values of any type. Empty for a bounded schema."""
    return _walk(schema, path, value=True)


def _walk(node: Any, path: str, *, value: bool) -> list[str]:
    if node is False:
        return []
    if node is True or not isinstance(node, dict):
        return [f"{path}: any value"] if value else []
    found: list[str] = []
    # A local reference is as bounded as its target, which is walked under $defs.
    closed = "enum" in node or "const" in node or str(node.get("$ref", "")).startswith("#/$defs/")
    types = _types(node)
    branches = [b for k in ("anyOf", "oneOf") for b in node.get(k, [])]
    if value and not closed and not types and not branches:
        found.append(f"{path}: a value of any type")
    if not closed:
        if "string" in types and "maxLength" not in node:
            found.append(f"{path}: a string without maxLength")
        if "array" in types:
            if "maxItems" not in node and node.get("items") is not False:
                found.append(f"{path}: an array without maxItems")
            if "items" not in node and "prefixItems" not in node:
                found.append(f"{path}[*]: items of any type")
        if "object" in types and node.get("additionalProperties") is not False:
            if "maxProperties" not in node:
                found.append(f"{path}: an object open to any number of keys")
            names = node.get("propertyNames")
            if not (isinstance(names, dict) and any(k in names for k in ("maxLength", "enum", "const"))):
                found.append(f"{path}: an object open to keys of any length")
            if "additionalProperties" not in node:
                found.append(f"{path}.*: values of any type")
    for key in _SUBSCHEMA_MAPS:
        for name, sub in (node.get(key) or {}).items():
            found += _walk(sub, f"{path}.{name}", value=key != "dependentSchemas")
    for key in _SUBSCHEMA_LISTS:
        # anyOf/oneOf branches are the value itself where the node declares no type; beside a
        # type they only constrain it (e.g. "one of these properties is required").
        value_position = key == "prefixItems" or (key in ("anyOf", "oneOf") and not types)
        for i, sub in enumerate(node.get(key) or []):
            found += _walk(sub, f"{path}/{key}[{i}]", value=value_position)
    for key in _SUBSCHEMA_ONE:
        if key in node and key != "if":  # `if` only tests; `then`/`else` constrain
            sub = node[key]
            value_position = key in ("items", "additionalProperties")  # names are strings
            if key == "additionalProperties" and sub is False:
                continue
            found += _walk(sub, f"{path}/{key}", value=value_position)
    return found


def max_json_bytes(schema: Any) -> int | None:
    """The most bytes any instance valid under `schema` takes as compact JSON (orjson's
    encoding), or None when the schema does not bound it. A safe overestimate: conditional
    subschemas (allOf, if/then) only narrow, so they are left out; a schema with references
    ($ref) is not sized (its tool takes its category's default)."""
    if schema is False:
        return 0
    if not isinstance(schema, dict) or "$ref" in schema:
        return None
    for key in ("const", "enum"):
        if key in schema:
            values = [schema["const"]] if key == "const" else schema["enum"]
            try:
                return max((len(orjson.dumps(v)) for v in values), default=0)
            except (TypeError, orjson.JSONEncodeError):
                return None
    types = _types(schema)
    if not types:
        branches = [b for k in ("anyOf", "oneOf") for b in schema.get(k, [])]
        sizes = [max_json_bytes(b) for b in branches]
        return max(sizes) if sizes and None not in sizes else None  # type: ignore[type-var]
    sizes = [_type_bytes(t, schema) for t in types]
    return None if None in sizes else max(sizes)  # type: ignore[type-var]


def _type_bytes(t: str, node: dict[str, Any]) -> int | None:
    if t in _SCALAR_BYTES:
        lo, hi = node.get("minimum"), node.get("maximum")
        if t == "integer" and isinstance(lo, int) and isinstance(hi, int) and max(abs(lo), abs(hi)) < 10**15:
            # An integral float (1000.0) is a valid integer too: room for its ".0".
            return max(len(str(lo)), len(str(hi))) + 2
        return _SCALAR_BYTES[t]
    if t == "string":
        limit = node.get("maxLength")
        return None if limit is None else 2 + _BYTES_PER_CHAR * int(limit)
    if t == "array":
        return _array_bytes(node)
    if t == "object":
        return _object_bytes(node)
    return None


def _array_bytes(node: dict[str, Any]) -> int | None:
    prefix = [max_json_bytes(s) for s in node.get("prefixItems", [])]
    if None in prefix:
        return None
    items = node.get("items", True)
    limit = node.get("maxItems")
    if items is False:
        count, each = len(prefix), 0
    else:
        if limit is None:
            return None
        each_or_none = max_json_bytes(items)
        if each_or_none is None:
            return None
        count, each = int(limit), each_or_none
    sizes = sorted([*prefix, *([each] * max(0, count - len(prefix)))], reverse=True)[:count]
    return 2 + sum(sizes) + max(0, len(sizes) - 1)


def _object_bytes(node: dict[str, Any]) -> int | None:
    props = node.get("properties") or {}
    entries: list[int] = []
    for name, sub in props.items():
        size = max_json_bytes(sub)
        if size is None:
            return None
        entries.append(len(orjson.dumps(name)) + 1 + size)
    limit = node.get("maxProperties")
    extra = node.get("additionalProperties", True)
    if extra is not False:
        names = node.get("propertyNames")
        key = max_json_bytes({"type": "string", **names}) if isinstance(names, dict) else None
        value = max_json_bytes(extra)
        if limit is None or key is None or value is None:
            return None
        entries += [key + 1 + value] * int(limit)
    chosen = sorted(entries, reverse=True)[: int(limit) if limit is not None else None]
    return 2 + sum(chosen) + max(0, len(chosen) - 1)


def size_first(schema: Any) -> Any:
    """The same schema with size keywords first in every subschema (validation order only)."""
    if isinstance(schema, list):
        return [size_first(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    first = {k: schema[k] for k in _SIZE_FIRST if k in schema}
    rest = {k: v for k, v in schema.items() if k not in first}
    out: dict[str, Any] = {}
    for k, v in (first | rest).items():
        if k in _SUBSCHEMA_MAPS:
            out[k] = {name: size_first(sub) for name, sub in v.items()} if isinstance(v, dict) else v
        elif k in _SUBSCHEMA_LISTS or k in _SUBSCHEMA_ONE:
            out[k] = size_first(v)
        else:
            out[k] = v
    return out


def first_error(validator: Draft202012Validator, instance: Any) -> ValidationError | None:
    """The error to report for `instance`, found with bounded work (use with `size_first`)."""
    errors = validator.iter_errors(instance)
    first = next(errors, None)
    if first is None or first.validator in _REPORT_AT_ONCE:
        return first
    return best_match(itertools.chain([first], itertools.islice(errors, _ERRORS_CONSIDERED - 1)))


# The bus: the largest message the product needs NATS to carry (max_payload in every shipped
# NATS: `toolproxy up`, compose, Kubernetes): a call's arguments at the proxy's 1 MiB body
# bound with their envelope, or a tool's reply (artifacts), with room. A server configured
# smaller refuses larger calls with 413 payload_too_large, before anything runs.
NATS_MAX_PAYLOAD = 8 * 1024 * 1024
# What a call adds around its arguments on the bus: the context, the headers and the signed
# call context (wire/call_context.py, at most 4 KiB), rounded up.
BUS_ENVELOPE_BYTES = 8 * 1024
