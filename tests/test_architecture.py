"""The house's layout, checked: what the tests share lives in tests/support/, no module imports a
test module or the conftest, and conftest.py holds fixtures only."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


# --- the tests' own layout: read with `ast`, never imported ----------------------------------


def _module_of(path: Path) -> str:
    """The dotted name pytest imports a file under (tests/ is a package under the repo's root)."""
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """Every module a file names in an import, at any depth (in functions too), relative imports
    resolved; `from X import y` names both X and X.y (y may be a module); so does a literal
    `importlib.import_module(...)` or `__import__(...)`."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in {"import_module", "__import__"}))):
            yield node.lineno, node.args[0].value


def _is_test_or_conftest(name: str) -> bool:
    """A test module (test_*.py, *_test.py, as pytest collects them) or a conftest, in the tests
    package or imported bare as pytest's rootdir-relative mode would."""
    parts = name.split(".")
    if parts[0] == "tests":
        parts = parts[1:]
    elif len(parts) > 1:
        return False
    return any(p == "conftest" or p.startswith("test_") or p.endswith("_test") for p in parts)


def _test_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    tree = ast.parse(source)
    return sorted({f"{line}: {name}" for line, name in _imports(tree, module, is_package)
                   if _is_test_or_conftest(name)})


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Attribute) and target.attr == "fixture") or \
                (isinstance(target, ast.Name) and target.id == "fixture"):
            return True
    return False


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id if isinstance(n, ast.Name) else ast.unparse(n) for n in node.targets]
    if isinstance(node, ast.AnnAssign):
        return [node.target.id if isinstance(node.target, ast.Name) else ast.unparse(node.target)]
    return []


def _not_fixtures(source: str) -> list[str]:
    """What a conftest defines at module level beyond what the rule allows (see the test)."""
    tree = ast.parse(source)
    kept: list[ast.stmt] = []  # fixtures and hooks: the roots of "used by a fixture"
    private: dict[str, ast.stmt] = {}
    wrong: list[str] = []
    for i, node in enumerate(tree.body):
        names = _defined(node)
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            continue  # the module's docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"} \
                and not node.orelse and all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                (_is_fixture(node) or node.name.startswith("pytest_")):
            kept.append(node)
            continue
        if names == ["pytest_plugins"]:
            continue
        if names and all(n.startswith("_") for n in names):
            private.update((n, node) for n in names)
            continue
        wrong.append(f"{node.lineno}: {', '.join(names) or ast.unparse(node).splitlines()[0]}")
    used: set[str] = set()
    for node in kept:
        used |= _names_in(node)
    reached = used & set(private)
    while reached:
        name = reached.pop()
        more = _names_in(private[name]) & set(private) - used
        used |= more
        reached |= more
    wrong += [f"{node.lineno}: {name} (private, used by no fixture)"
              for name, node in private.items() if name not in used]
    return sorted(wrong, key=lambda w: int(w.split(":")[0]))


def test_no_module_imports_a_test_module_or_the_conftest() -> None:
    """Tests share helpers through tests/support/ and fixtures through conftest.py: no file under
    tests/ imports a test module (`tests.test_*`) or `tests.conftest`, anywhere in the file."""
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 50 and TESTS / "conftest.py" in files  # the walk found the suite
    found = {str(f.relative_to(TESTS.parent)): hits for f in files
             if (hits := _test_imports(f.read_text(), _module_of(f), f.name == "__init__.py"))}
    assert found == {}


def test_conftest_holds_fixtures_only() -> None:
    """Each conftest.py under tests/ defines, at module level, only: its docstring, imports (also
    under `if TYPE_CHECKING:`), `pytest_plugins`, fixtures (functions decorated with
    `pytest.fixture`), hooks (functions named `pytest_*`), and private names (a leading `_`)
    that a fixture or a hook uses, directly or through another such name. Helpers, constants
    and classes that tests use go to tests/support/."""
    conftests = sorted(TESTS.rglob("conftest.py"))
    assert TESTS / "conftest.py" in conftests
    found = {str(f.relative_to(TESTS.parent)): wrong for f in conftests
             if (wrong := _not_fixtures(f.read_text()))}
    assert found == {}


IMPORT_CASES = [
    ("a helper module is fine", "tests.test_a", "from tests.support.calls import bearer", []),
    ("the support package is fine", "tests.test_a", "from tests import support", []),
    ("a test module", "tests.test_a", "from tests.test_mcp import raw", ["1: tests.test_mcp", "1: tests.test_mcp.raw"]),
    ("the conftest", "tests.support.x", "import tests.conftest", ["1: tests.conftest"]),
    ("a test module by name", "tests.test_a", "from tests import test_mcp", ["1: tests.test_mcp"]),
    ("inside a function", "tests.test_a", "def f():\n    from tests.test_cli import cli",
     ["2: tests.test_cli", "2: tests.test_cli.cli"]),
    ("relative, from the package", "tests.test_a", "from .conftest import x", ["1: tests.conftest", "1: tests.conftest.x"]),
    ("relative, from a subpackage", "tests.support.x", "from ..test_up import Up",
     ["1: tests.test_up", "1: tests.test_up.Up"]),
    ("rootdir-relative", "tests.test_a", "import conftest", ["1: conftest"]),
    ("by importlib", "tests.test_a", "importlib.import_module('tests.test_chain')", ["1: tests.test_chain"]),
    ("a third party's test-like name", "tests.test_a", "import pytest_asyncio, unittest", []),
]


@pytest.mark.parametrize("note, module, source, expected", IMPORT_CASES, ids=[c[0] for c in IMPORT_CASES])
def test_the_import_rule_catches_each_way_in(note: str, module: str, source: str, expected: list[str]) -> None:
    assert _test_imports(source, module) == expected, note


CONFTEST_OK = '''"""Fixtures."""
import pytest
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from x import Y
pytest_plugins = ["tests.support.more_fixtures"]
_ROOT = "r"
def _root():
    return _ROOT
@pytest.fixture(scope="session")
def root():
    return _root()
@pytest.fixture
async def other(root):
    yield root
def pytest_configure(config):
    pass
'''


CONFTEST_CASES = [
    ("fixtures, hooks, imports, pytest_plugins and the privates they use", "", []),
    ("a helper function", "def bearer(tok):\n    return tok", ["18: bearer"]),
    ("a helper coroutine", "async def invoke(c):\n    pass", ["18: invoke"]),
    ("a constant", "TEST_SECRET = 'x'", ["18: TEST_SECRET"]),
    ("a class", "class BusSpy:\n    pass", ["18: BusSpy"]),
    ("a private name no fixture uses", "_unused = 1", ["18: _unused (private, used by no fixture)"]),
    ("code under TYPE_CHECKING", "if TYPE_CHECKING:\n    X = 1", ["18: if TYPE_CHECKING:"]),
    ("a statement", "print('hi')", ["18: print('hi')"]),
]


@pytest.mark.parametrize("note, extra, expected", CONFTEST_CASES, ids=[c[0] for c in CONFTEST_CASES])
def test_the_conftest_rule_catches_each_helper(note: str, extra: str, expected: list[str]) -> None:
    assert _not_fixtures(CONFTEST_OK + extra) == expected, note


# --- the code's layout: every import points down ---------------------------------------------

ROOT = TESTS.parent
PACKAGES = ("wire", "infra", "pdp", "services", "proxy", "cli", "client")


def test_import_linter_contracts_are_kept() -> None:
    """The contracts in pyproject.toml ([tool.importlinter]: the layers, the surfaces'
    independence, pdp's data below its decisions, the core knowing no tool family, the
    pipeline's stages below their conductor), as `lint-imports` checks them."""
    done = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " BROKEN" not in done.stdout and " KEPT" in done.stdout


def _cycles(graph: object, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]  # type: ignore[attr-defined]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child) & modules))))  # type: ignore[attr-defined]
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_between_modules() -> None:
    """No two modules import each other, directly or round a circle (a package's __init__
    re-exporting its own modules counts too). Imports under TYPE_CHECKING are left out."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert _cycles(graph, set(graph.modules)) == []


def test_a_circle_is_found() -> None:
    import grimp

    graph = grimp.ImportGraph()
    for m in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(m)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.z")
    assert _cycles(graph, set(graph.modules)) == []
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph, set(graph.modules)) == [["a.x", "a.y", "a.z"]]


MAX_LINES = 400


def test_no_module_outside_tests_is_over_400_lines() -> None:
    """Small modules, one concept each (STYLE.md): a file that grows past this splits."""
    long = {str(p.relative_to(ROOT)): n for top in PACKAGES for p in (ROOT / top).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
