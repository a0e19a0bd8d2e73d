"""The shipped policy against the shared decision table (pdp/decision_table.json) and its own
Rego unit tests: on the embedded engine and on a real OPA server (the `opa_url` fixture starts
../shared/bin/opa; the same cases, compared the same way)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import pytest
from opa_client.opa_async import AsyncOpaClient

from pdp.decision import parse_decision
from pdp.embedded import EmbeddedEngine
from pdp.policy_set import default_policy_dir, load_policy_dir
from pdp.rego_tests import discover, run_policy_tests

TABLE: list[dict[str, Any]] = orjson.loads(
    (Path(default_policy_dir()).parent / "decision_table.json").read_bytes()
)
NOTES = [case["note"] for case in TABLE]

OPA_POLICY_PREFIX = "toolproxy/"  # the ids pdp.opa.OpaEngine pushes: these replace them


def assert_decides(case: dict[str, Any], got: Any) -> None:
    expect = case["expect"]
    assert got is not None, f"{case['note']}: the decision is undefined"
    actual = {key: got.get(key) for key in ("allow", "require_approval", "reasons")}
    if "obligations" in expect:
        actual["obligations"] = got.get("obligations")
    assert actual == expect, case["note"]
    # And the proxy accepts it as a decision (obligations' shape included).
    parse_decision(got, decision_id="d", engine="test", revision="r")


# --- the table's own shape ------------------------------------------------------------------


def test_table_notes_are_unique_and_cases_complete() -> None:
    assert len(set(NOTES)) == len(NOTES)
    keys = {"version", "subject", "action", "tool", "args", "context", "grants", "overrides",
            "approval", "phase"}
    for case in TABLE:
        # team_rules came later: a case without it is a case with none (the policy's default)
        assert set(case["input"]) - {"team_rules"} == keys, case["note"]
        assert {"allow", "require_approval", "reasons"} <= set(case["expect"]), case["note"]


def test_table_covers_every_category_action_grant_and_approval_state() -> None:
    seen = set()
    for case in TABLE:
        doc = case["input"]
        if (doc["phase"] != "call" or doc["overrides"] or doc.get("team_rules")
                or doc["context"]["confidential"]):
            continue
        approval = doc["approval"]
        state = None if approval is None else (approval["state"], approval["args_match"])
        granted = doc["action"] in doc["grants"]
        seen.add((doc["tool"]["category"], doc["tool"]["action"], granted, state))
    states = [None, ("pending", True), ("approved", True), ("approved", False),
              ("denied", True), ("expired", True)]
    for category in "ABCD":
        for action in ("read", "write"):
            for granted in (False, True):
                for state in states if category == "D" else [None]:
                    assert (category, action, granted, state) in seen


# --- embedded engine (regopy) ---------------------------------------------------------------


@pytest.fixture(scope="module")
async def embedded() -> AsyncIterator[EmbeddedEngine]:
    engine = EmbeddedEngine()
    await engine.load(load_policy_dir())
    yield engine
    await engine.close()


@pytest.mark.parametrize("case", TABLE, ids=NOTES)
async def test_embedded_engine_decides_as_the_table_says(
    embedded: EmbeddedEngine, case: dict[str, Any]
) -> None:
    assert_decides(case, await embedded.evaluate(case["input"]))


# The arguments of every kind of tool the table has, to vary undeclared inputs with.
_SAMPLE_ARGS = [{}, {"expr": "1+1"}, {"op": "set_price", "product_id": "milk", "price": 1},
                {"query": "select 1"}, {"text": "x" * 50, "n": 3}]


async def test_the_declared_input_reads_hold(embedded: EmbeddedEngine) -> None:
    """The decision cache keys on what the policy declares it reads (pdp.reads): a tool not
    declared argument-aware, or any run id, must never change a decision."""
    from pdp.reads import declared_reads

    reads = declared_reads(load_policy_dir())
    assert reads.args_of == {"data.query", "greenfood.order"} and not reads.agent_run_id
    assert not reads.agent_id
    checked = 0
    for case in TABLE:
        doc = case["input"]
        expected = await embedded.evaluate(doc)
        variants = [{**doc, "context": {**doc["context"], "agent_run_id": run}}
                    for run in (None, "run-1", "another-run")]
        variants += [{**doc, "subject": {**doc["subject"], "agent_id": agent}}
                     for agent in ("agent-1", "another-agent", "")]
        if not reads.reads_args(doc["tool"]["tool_id"]):
            variants += [{**doc, "args": args} for args in _SAMPLE_ARGS]
        for variant in variants:
            assert await embedded.evaluate(variant) == expected, case["note"]
            checked += 1
    assert checked > len(TABLE) * 3


def test_shipped_rego_unit_tests_pass() -> None:
    results = run_policy_tests(load_policy_dir())
    failed = [f"{r.package}.{r.name}: {r.error}" for r in results if not r.passed]
    assert not failed, "\n".join(failed)
    assert len(results) >= 40


def _policy_dir_with(tmp_path: Path, test_source: str) -> Path:
    shutil.copy(Path(default_policy_dir()) / "authz.rego", tmp_path / "authz.rego")
    (tmp_path / "broken_test.rego").write_text(test_source)
    return tmp_path


def test_a_failing_rego_test_is_reported_by_name(tmp_path: Path) -> None:
    source = """package toolproxy.broken_test

import rego.v1

import data.toolproxy.authz

test_math_is_denied if {
	d := authz.decision with input.tool as {"tool_id": "math", "category": "A", "action": "read"}
		with input.phase as "call"
		with input.action as "tool.math.invoke"
		with input.context as {"team_id": null, "confidential": false}
	d.allow == false
}

test_this_one_passes if {
	true
}

test_undefined_fails if {
	input.nothing_here
}
"""
    results = run_policy_tests(load_policy_dir(_policy_dir_with(tmp_path, source)))
    by_name = {r.name: r for r in results}
    assert set(by_name) == {"test_math_is_denied", "test_this_one_passes", "test_undefined_fails"}
    assert all(r.package == "toolproxy.broken_test" for r in results)
    assert by_name["test_this_one_passes"].passed
    assert not by_name["test_math_is_denied"].passed
    assert not by_name["test_undefined_fails"].passed
    assert by_name["test_undefined_fails"].error == "undefined"


def test_a_test_file_that_does_not_compile_is_one_failed_result(tmp_path: Path) -> None:
    source = "package toolproxy.broken_test\n\nimport rego.v1\n\ntest_unclosed if {\n\t1 ==\n"
    results = run_policy_tests(load_policy_dir(_policy_dir_with(tmp_path, source)))
    assert len(results) == 1
    assert not results[0].passed
    assert "broken_test.rego" in (results[0].error or "")


def test_an_engine_abort_is_a_failed_result_not_a_crash(tmp_path: Path) -> None:
    # rego-cpp aborts the process compiling a whole-input `with` over rules that read rules.
    source = """package toolproxy.broken_test

import rego.v1

import data.toolproxy.authz

test_whole_input_with if {
	authz.decision.allow with input as {}
}
"""
    results = run_policy_tests(load_policy_dir(_policy_dir_with(tmp_path, source)))
    assert len(results) == 1
    assert not results[0].passed


# --- a real OPA server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
async def opa(opa_url: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    policies = load_policy_dir()
    parts = urlsplit(opa_url)
    client = AsyncOpaClient(
        host=parts.hostname or "localhost",
        port=parts.port or (443 if parts.scheme == "https" else 8181),
        ssl=parts.scheme == "https",
    )
    async with client:
        for name, source in {**policies.modules, **policies.tests}.items():
            await client.update_policy_from_string(source, OPA_POLICY_PREFIX + name, rego_compat=False)
        try:
            async with aiohttp.ClientSession() as http:
                yield http, opa_url
        finally:
            for name in policies.tests:
                await client.delete_policy(OPA_POLICY_PREFIX + name)


async def _opa_data(opa: tuple[aiohttp.ClientSession, str], path: str, body: dict[str, Any]) -> Any:
    http, url = opa
    async with http.post(f"{url}/v1/data/{path}", json=body) as response:
        assert response.status == 200, await response.text()
        return (await response.json()).get("result")  # absent: undefined


async def test_opa_decides_as_the_table_says(opa: tuple[aiohttp.ClientSession, str]) -> None:
    """One test for the whole table (one skip without OPA), listing every case that differs."""
    wrong = []
    for case in TABLE:
        got = await _opa_data(opa, "toolproxy/authz/decision", {"input": case["input"]})
        try:
            assert_decides(case, got)
        except AssertionError:
            wrong.append(f"{case['note']}: got {got}, expected {case['expect']}")
    assert not wrong, "\n".join(wrong)


async def test_shipped_rego_unit_tests_pass_on_opa(opa: tuple[aiohttp.ClientSession, str]) -> None:
    failed, ran = [], 0
    for source in load_policy_dir().tests.values():
        package, names = discover(source)
        for name in names:
            ran += 1
            if await _opa_data(opa, f"{package.replace('.', '/')}/{name}", {}) is not True:
                failed.append(f"{package}.{name}")
    assert ran >= 40
    assert not failed, failed
