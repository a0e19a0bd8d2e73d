"""Rego unit tests (`test_*` rules of `*_test.rego` modules) run on the embedded engine.

As with `opa test`, a test passes only if its rule evaluates to `true`. False, undefined
or an evaluation error fails it. If the bundle does not compile, the run returns one failed
result with the engine's message. Test names come from the modules' text (rule heads at the
start of a line) because rego-cpp cannot list a module's tests.

The tests run in a child process by default. On some sources rego-cpp aborts the whole
process with an uncaught C++ exception instead of raising. One example is `with input as
{...}` over a rule that reads another rule. Isolated, such an abort becomes a failed result.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
from regopy import Input, Interpreter, RegoError
from regopy.rego_shared import (
    rego_bundle_query_entrypoint,
    rego_free_output,
    rego_output_ok,
    rego_output_string,
)

from pdp.policy_set import PolicySet

_PACKAGE_RE = re.compile(r"^package\s+([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", re.M | re.ASCII)
_TEST_RE = re.compile(r"^(test_[A-Za-z0-9_]*)", re.M)
_ERRORMSG_RE = re.compile(r"\(errormsg \d+:([^\n]*)\)")
_CHILD_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest class, despite its name

    package: str
    name: str
    passed: bool
    error: str | None = None


def discover(source: str) -> tuple[str, list[str]]:
    """(package, test rule names in order of first appearance) of one test module."""
    package = _PACKAGE_RE.search(source)
    names = list(dict.fromkeys(_TEST_RE.findall(source)))
    return (package.group(1) if package else ""), names


def run_policy_tests(policies: PolicySet, *, isolated: bool = True) -> list[TestResult]:
    if not isolated:
        return _run(policies.modules, policies.tests)
    request = orjson.dumps({"modules": policies.modules, "tests": policies.tests})
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        child = subprocess.run(
            [sys.executable, "-c", "from pdp.rego_tests import _child_main; _child_main()"],
            input=request,
            capture_output=True,
            env=env,
            timeout=_CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return [_failed_run(f"the tests did not finish within {_CHILD_TIMEOUT_S:.0f} s")]
    if child.returncode != 0:
        stderr = child.stderr.decode(errors="replace").strip()
        return [_failed_run(f"the engine crashed (exit {child.returncode}): {stderr[-2000:]}")]
    return [TestResult(**r) for r in orjson.loads(child.stdout)]


def _child_main() -> None:
    """rego-cpp prints its readable compile errors on stdout: they are captured, and the
    results go out on the original stdout alone."""
    request = orjson.loads(sys.stdin.buffer.read())
    results_fd = os.dup(1)
    with tempfile.TemporaryFile() as printed:
        os.dup2(printed.fileno(), 1)
        results = _run(request["modules"], request["tests"])
        printed.seek(0)
        engine_text = printed.read().decode(errors="replace").strip()
    if engine_text and len(results) == 1 and results[0].name == "compile":
        results = [_failed_run(engine_text)]
    os.write(results_fd, orjson.dumps([asdict(r) for r in results]))


def _failed_run(message: str) -> TestResult:
    return TestResult(package="", name="compile", passed=False, error=message)


def compile_isolated(policies: PolicySet) -> str | None:
    """Compile the modules in a child process: None if they compile, else the engine's message.
    Used before a pushed policy is accepted, so a source that aborts rego-cpp cannot take a
    proxy down with it."""
    results = run_policy_tests(PolicySet(modules=policies.modules, tests={}))
    return results[0].error if results else None


def _run(modules: dict[str, str], tests: dict[str, str]) -> list[TestResult]:
    found = [discover(source) for _, source in sorted(tests.items())]
    cases = [(package, name) for package, names in found if package for name in names]
    entrypoints = {case: f"{case[0].replace('.', '/')}/{case[1]}" for case in cases}
    builder = Interpreter()
    try:
        for file, source in {**modules, **tests}.items():
            builder.add_module(file, source)
        # Without a test to run, the modules are still compiled: a broken file is reported.
        bundle = builder.build(None if cases else "true", list(entrypoints.values()))
    except RegoError as exc:
        return [_failed_run(str(exc))]
    if not bundle.ok():
        return [_failed_run("the test bundle did not build")]
    rego = Interpreter()
    rego.set_input(Input({}))  # tests set what they need with `with input.<key> as ...`
    return [_run_one(rego, bundle, case, entrypoints[case]) for case in cases]


def _run_one(rego: Interpreter, bundle: Any, case: tuple[str, str], entrypoint: str) -> TestResult:
    package, name = case
    try:
        ok, text = _query_text(rego, bundle, entrypoint)
    except RegoError as exc:
        return TestResult(package, name, False, str(exc))
    if not ok:
        return TestResult(package, name, False, f"evaluation error: {text.strip()}")
    if text == "undefined":
        return TestResult(package, name, False, "undefined")
    if text.startswith("(error"):  # e.g. an unknown function: rego-cpp reports it only now
        messages = _ERRORMSG_RE.findall(text)
        return TestResult(package, name, False, "; ".join(messages) or text[:500])
    try:
        expressions = orjson.loads(text).get("expressions") or []
    except (orjson.JSONDecodeError, AttributeError):
        return TestResult(package, name, False, f"unreadable result: {text[:200]}")
    if expressions == [True]:
        return TestResult(package, name, True)
    value = orjson.dumps(expressions[0]).decode()[:200] if expressions else "undefined"
    return TestResult(package, name, False, f"evaluated to {value}")


def _query_text(rego: Interpreter, bundle: Any, entrypoint: str) -> tuple[bool, str]:
    """The engine's raw answer. regopy's own Output parses it as JSON and raises on the
    s-expression rego-cpp returns for some errors, losing the message."""
    output = rego_bundle_query_entrypoint(rego._impl, bundle._impl, entrypoint)
    try:
        return rego_output_ok(output), rego_output_string(output)
    finally:
        rego_free_output(output)
