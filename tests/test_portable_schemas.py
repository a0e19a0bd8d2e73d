"""Portable schemas (wire/portable_schema.py): every tool of the whole catalog — the built-in
families, the example plugins, the test services — publishes input and output schemas every
model API and MCP client takes; plugin tools are checked and reported when installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.web import keys as appkeys
from services.plugins.manifest import portability
from tests.support.calls import bearer
from tests.support.plugin_harness import (  # noqa: F401  (fixtures)
    install,
    pclient,
    plugin_db,
    plugin_files,
    plugin_host,
    tar_gz,
)
from wire.portable_schema import problems, published, published_problems, root_rules

EXAMPLES = Path(__file__).resolve().parents[1] / "plugins/examples"


async def test_the_whole_catalog_is_portable(client) -> None:
    catalog = client.app[appkeys.CATALOG]
    manifests = catalog.manifests()
    assert len(manifests) > 40
    found = {m.tool_id: published_problems(m.input_schema) + published_problems(m.output_schema)
             for m in manifests}
    assert {k: v for k, v in found.items() if v} == {}
    for tool in sorted(EXAMPLES.glob("*/tool.json")):
        assert portability(json.loads(tool.read_text()))["portable"], tool


CASES = [
    ("boolean subschema", {"type": "object", "properties": {"a": False}},
     ["$.properties.a: a boolean schema (false); use an object schema"]),
    ("type list", {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
     ["$.properties.a: type ['string', 'null'] names several types; use anyOf with one type each"]),
    ("oneOf", {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}},
     ["$.properties.a: oneOf is not portable (use anyOf)"]),
    ("root must be an object", {"anyOf": [{"type": "object"}]},
     ['$: the root must be {"type": "object", ...}']),
    ("untyped anyOf branch below the root", {"type": "object", "properties": {
        "a": {"anyOf": [{"required": ["x"]}]}}},
     ["$.properties.a.anyOf[0]: a branch without its own type (anyOf holds alternative types; "
      "a rule across properties belongs in the tool)"]),
    ("portable", {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                                                   "m": {"type": "object", "maxProperties": 4,
                                                         "propertyNames": {"maxLength": 8},
                                                         "additionalProperties": {"type": "string"}}},
                  "additionalProperties": False}, []),
]


@pytest.mark.parametrize(("note", "schema", "expected"), CASES, ids=[c[0] for c in CASES])
def test_problems(note: str, schema: Any, expected: list[str]) -> None:
    assert problems(schema) == expected, note


def test_root_rules_are_left_out_of_what_is_published_and_only_those() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "additionalProperties": False,
              "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
              "allOf": [{"if": {"properties": {"a": {"const": "x"}}}, "then": {"properties": {"b": False}}}]}
    assert root_rules(schema) == ["allOf", "anyOf"]
    assert published(schema) == {k: schema[k] for k in ("type", "properties", "additionalProperties")}
    assert published_problems(schema) == [] and problems(schema) != []
    typed = {"type": "object", "anyOf": [{"type": "object"}]}
    assert published(typed) is typed  # an anyOf of types is not a rule


async def test_a_plugin_install_reports_what_is_not_portable(pclient, token) -> None:
    admin = token(agent="root", team="ops", role="admin")
    files = plugin_files("text.loose", "function invoke(args) { return {n: 1}; }", input_schema={
        "type": "object", "additionalProperties": False,
        "properties": {"case": {"type": ["string", "null"], "maxLength": 40}}})
    status, body = await install(pclient, admin, tar_gz(files))
    assert status == 201, body
    report = body["plugin"]["schema_portability"]
    assert report == {"portable": False, "problems": [
        "input_schema.properties.case: type ['string', 'null'] names several types; use anyOf with one type each"]}
    r = await pclient.get("/v1/admin/plugins", params={"name": "text.loose"}, headers=bearer(admin))
    assert (await r.json())["plugins"][0]["schema_portability"] == report
