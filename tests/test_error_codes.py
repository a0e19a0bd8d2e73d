"""Every typed error's stable code: each ApiError and ToolError subclass lives in its package's
`errors.py`, its code is a snake_case string, and no code is defined twice.

Two namespaces, as on the wire: an ApiError's code is the body's `error.code` (and the metrics'
`reason`); a ToolError's code travels in the tool's reply and reaches the agent as
`error.tool_code`. A code is counted where a class defines it (`code`, or `codes` for one that
carries a code chosen at run time), so a subclass that only narrows its parent shares the
parent's code without defining it again.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import Counter
from types import ModuleType

import pytest

from proxy.errors import ApiError
from services.sdk.errors import ToolError

ROOTS = ("wire", "infra", "pdp", "services", "proxy", "cli", "client")
# The sandbox worker is a script the sandbox runs in a process of its own, importing nothing of
# the project (services/plugins/worker.py says why); it declares no error of either kind.
NOT_IMPORTED = frozenset({"services.plugins.worker"})
SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

# A code defined by two classes on purpose, with the reason. None today.
SHARED_API: dict[str, str] = {}
SHARED_TOOL: dict[str, str] = {}



def _modules() -> list[ModuleType]:
    """Every module of the project's packages, imported (a new errors.py is found too)."""
    found = []
    for root in ROOTS:
        package = importlib.import_module(root)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            if info.name not in NOT_IMPORTED:
                found.append(importlib.import_module(info.name))
    return found


MODULES = _modules()
ERRORS_MODULES = [m for m in MODULES if m.__name__.rsplit(".", 1)[-1] == "errors"]


def _subclasses(base: type) -> list[type]:
    out, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.append(sub)
                todo.append(sub)
    return [c for c in out if c.__module__.split(".")[0] in ROOTS]


def _defined(base: type) -> list[tuple[str, str]]:
    """(code, where) for each code a class of the project defines, the base's own included."""
    out = []
    for cls in [base, *_subclasses(base)]:
        where = f"{cls.__module__}.{cls.__qualname__}"
        if "code" in cls.__dict__:
            out.append((cls.__dict__["code"], where))
        out += [(code, where) for code in sorted(cls.__dict__.get("codes", ()))]
    return out


def test_the_errors_modules_are_found_by_walking_the_packages() -> None:
    names = {m.__name__ for m in ERRORS_MODULES}
    assert {"proxy.errors", "services.sdk.errors", "proxy.web.admin.errors", "proxy.web.api.errors",
            "proxy.web.console.errors", "proxy.turns.errors", "services.netguard.errors"} <= names
    # Every family whose tools answer codes of their own declares them in its errors.py.
    for family in ("agents", "external_api", "files", "llm", "router", "search", "wallet",
                   "platforms", "platforms.water"):
        assert f"services.{family}.errors" in names, family


@pytest.mark.parametrize("base", [ApiError, ToolError], ids=["ApiError", "ToolError"])
def test_every_typed_error_lives_in_its_packages_errors_module(base: type) -> None:
    outside = [f"{c.__module__}.{c.__qualname__}" for c in _subclasses(base)
               if c.__module__.rsplit(".", 1)[-1] != "errors"]
    assert sorted(outside) == []


@pytest.mark.parametrize("base", [ApiError, ToolError], ids=["ApiError", "ToolError"])
def test_every_code_is_a_snake_case_string(base: type) -> None:
    bad = [(code, where) for code, where in _defined(base)
           if not isinstance(code, str) or not SNAKE.fullmatch(code)]
    assert bad == []


@pytest.mark.parametrize(("base", "shared"), [(ApiError, SHARED_API), (ToolError, SHARED_TOOL)],
                         ids=["ApiError", "ToolError"])
def test_each_code_is_defined_once(base: type, shared: dict[str, str]) -> None:
    defined = _defined(base)
    counts = Counter(code for code, _ in defined)
    twice = {code: sorted(w for c, w in defined if c == code)
             for code, n in counts.items() if n > 1 and code not in shared}
    assert twice == {}
    # A code listed as shared still is (the list does not outlive its reason).
    assert [code for code in shared if counts[code] < 2] == []


def test_a_narrowing_subclass_shares_its_parents_code_without_defining_it() -> None:
    from proxy.errors import NotFound, UnknownTool
    from services.plugins.errors import PluginFailure

    assert UnknownTool.code == "unknown_tool" and issubclass(UnknownTool, NotFound)
    # PluginFailure defines no `code` of its own: the four it may carry are its `codes`.
    assert "code" not in PluginFailure.__dict__
    assert PluginFailure("plugin_timeout", "late").code == "plugin_timeout"
    assert ("plugin_timeout", "services.plugins.errors.PluginFailure") in _defined(ToolError)
