"""An OpenAPI 3.0/3.1 document (JSON or YAML) read within bounds, validated by
openapi-spec-validator, and turned into one tool definition per operation."""

from __future__ import annotations

import re
from typing import Any

import orjson
import yaml

from services.upstreams.errors import OpenApiRefused

MAX_DOCUMENT_BYTES = 2 << 20
MAX_OPERATIONS = 500
MAX_DEPTH = 64  # nesting of the document itself
MAX_SCHEMA_DEPTH = 32  # of one operation's schema, its $refs inlined
MAX_SCHEMA_NODES = 20_000
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Headers an operation's parameters never set: the transport's, and the credential's.
_HEADERS_REFUSED = frozenset({"authorization", "cookie", "host", "content-length", "content-type",
                              "accept", "transfer-encoding", "connection", "proxy-authorization"})
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_WORD = re.compile(r"[^A-Za-z0-9]+")


def load(raw: bytes | str) -> dict[str, Any]:
    """The document as JSON data, or OpenApiRefused. YAML aliases are refused (a small
    document with aliases can stand for a huge one)."""
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > MAX_DOCUMENT_BYTES:
        raise OpenApiRefused("openapi_too_large", f"the document exceeds {MAX_DOCUMENT_BYTES} bytes")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(data, Loader=yaml.SafeLoader)):
                raise OpenApiRefused("openapi_invalid", "YAML aliases are not accepted")
            doc = yaml.load(data, Loader=yaml.SafeLoader)  # noqa: S506 - the safe loader
            # YAML's integer keys (`200:`) and dates, as the JSON the document stands for.
            doc = orjson.loads(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS, default=str))
        except yaml.YAMLError as exc:
            raise OpenApiRefused("openapi_invalid", f"neither JSON nor YAML: {str(exc)[:200]}") from None
        except (RecursionError, orjson.JSONEncodeError):
            raise OpenApiRefused("openapi_too_deep", "the document is nested too deeply") from None
    if not isinstance(doc, dict):
        raise OpenApiRefused("openapi_invalid", "the document is not an object")
    _check_tree(doc)
    return doc


def _check_tree(doc: dict[str, Any]) -> None:
    """Depth, and every $ref local to the document (nothing is fetched from elsewhere)."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise OpenApiRefused("openapi_too_deep", f"the document nests deeper than {MAX_DEPTH}")
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref is not None and (not isinstance(ref, str) or not ref.startswith("#/")):
                raise OpenApiRefused("openapi_external_ref",
                                     f"only references inside the document are read, not {str(ref)[:100]!r}")
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Validated, then one tool definition per operation (bounded in number)."""
    paths = doc.get("paths") or {}
    if not isinstance(paths, dict):
        raise OpenApiRefused("openapi_invalid", "paths is not an object")
    count = sum(1 for item in paths.values() if isinstance(item, dict) for m in METHODS if m in item)
    if count > MAX_OPERATIONS:
        raise OpenApiRefused("openapi_too_many_operations",
                             f"{count} operations; at most {MAX_OPERATIONS} are read")
    if not str(doc.get("openapi", "")).startswith(("3.0.", "3.1.")):
        raise OpenApiRefused("openapi_invalid", "only OpenAPI 3.0 and 3.1 documents are read")
    # The validator (and the jsonschema machinery under it, ~8 MB) is loaded by the first
    # document read, not by every process that imports this module (each proxy worker does).
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    try:
        validate(doc)
    except OpenAPIValidationError as exc:
        raise OpenApiRefused("openapi_invalid", f"not a valid OpenAPI document: {str(exc)[:300]}") from None
    except RecursionError:
        raise OpenApiRefused("openapi_recursive_schema", "the document's references loop") from None
    except Exception as exc:  # noqa: BLE001 - the validator's own failure on odd input
        raise OpenApiRefused("openapi_invalid", f"not a valid OpenAPI document: {type(exc).__name__}") from None
    try:
        return _definitions(doc, paths)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, OpenApiRefused):
            raise
        raise OpenApiRefused("openapi_invalid", f"an operation cannot be read: {type(exc).__name__}") from None


def _definitions(doc: dict[str, Any], paths: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for path, item in paths.items():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                d = _definition(doc, path, method, op, shared)
                while d["name"] in names:
                    d["name"] += "_"
                names.add(d["name"])
                out.append(d)
    return out


def _definition(doc: dict[str, Any], path: str, method: str, op: dict[str, Any],
                shared: list[Any]) -> dict[str, Any]:
    name = str(op.get("operationId") or "")[:100] or \
        _WORD.sub("_", f"{method}_{path}").strip("_")[:100]
    props: dict[str, Any] = {}
    required: list[str] = []
    params: list[dict[str, str]] = []
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for p in [*shared, *(op.get("parameters") or [])]:
        p = _resolve(doc, p, set(), 0)
        if isinstance(p, dict) and p.get("in") in ("path", "query", "header"):
            merged[(p["in"], str(p.get("name")))] = p
    for (where, pname), p in merged.items():
        if where == "header" and (pname.lower() in _HEADERS_REFUSED or not _HEADER_NAME.match(pname)):
            continue
        prop = pname if pname not in props and pname != "body" else f"{where}_{pname}"
        schema = dict(_inline(doc, p.get("schema") or {}, set(), 0))
        if p.get("description") and "description" not in schema:
            schema["description"] = str(p["description"])[:500]
        props[prop] = schema
        if p.get("required") or where == "path":
            required.append(prop)
        params.append({"property": prop, "in": where, "name": pname})
    body = _resolve(doc, op.get("requestBody"), set(), 0)
    has_body = False
    if isinstance(body, dict):
        schema = _json_schema(doc, body.get("content"))
        if schema is not None:
            has_body = True
            props["body"] = schema
            if body.get("required"):
                required.append("body")
    input_schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        input_schema["required"] = required
    output_schema: dict[str, Any] = {"type": "object", "properties": {"status": {"type": "integer"}},
                                     "required": ["status"]}
    for code, response in sorted((op.get("responses") or {}).items()):
        if str(code).startswith("2"):
            schema = _json_schema(doc, (_resolve(doc, response, set(), 0) or {}).get("content"))
            if schema is not None:
                output_schema["properties"]["body"] = schema
            break
    description = " ".join(str(op.get(k) or "") for k in ("summary", "description")).strip()
    return {
        "name": name,
        "title": str(op["summary"])[:200] if op.get("summary") else None,
        "description": description[:2000] or f"{method.upper()} {path}",
        "input_schema": input_schema,
        "output_schema": output_schema,
        "annotations": {"readOnlyHint": method in ("get", "head"), "destructiveHint": method == "delete",
                        "openapi": {"method": method.upper(), "path": path, "parameters": params,
                                    "body": has_body}},
    }


def _json_schema(doc: dict[str, Any], content: Any) -> dict[str, Any] | None:
    if not isinstance(content, dict):
        return None
    for media, entry in content.items():
        if (media == "application/json" or media.endswith("+json")) and isinstance(entry, dict):
            return _inline(doc, entry.get("schema") or {}, set(), 0)
    return None


def _resolve(doc: dict[str, Any], node: Any, seen: set[str], depth: int) -> Any:
    """A node with its own $ref followed (local references only, checked before)."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if ref in seen:
            raise OpenApiRefused("openapi_recursive_schema",
                                 f"{ref} refers to itself; recursive schemas are not read")
        seen = seen | {ref}
        node = _pointer(doc, ref)
    return node


def _inline(doc: dict[str, Any], node: Any, seen: set[str], depth: int,
            budget: list[int] | None = None) -> Any:
    """A schema with every $ref inlined: a loop, deeper than MAX_SCHEMA_DEPTH or larger than
    MAX_SCHEMA_NODES (shared references multiply) is refused."""
    budget = budget if budget is not None else [MAX_SCHEMA_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise OpenApiRefused("openapi_too_large", f"a schema has more than {MAX_SCHEMA_NODES} nodes inlined")
    if depth > MAX_SCHEMA_DEPTH:
        raise OpenApiRefused("openapi_too_deep", f"a schema nests deeper than {MAX_SCHEMA_DEPTH}")
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise OpenApiRefused("openapi_recursive_schema",
                                     f"{ref} refers to itself; recursive schemas are not read")
            return _inline(doc, _pointer(doc, ref), seen | {ref}, depth + 1, budget)
        return {k: _inline(doc, v, seen, depth + 1, budget) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(doc, v, seen, depth + 1, budget) for v in node]
    return node


def _pointer(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise OpenApiRefused("openapi_invalid", f"{ref[:100]} points at nothing")
    return node


def size_of(doc: dict[str, Any]) -> int:
    return len(orjson.dumps(doc))
