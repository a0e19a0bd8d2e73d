"""The tool families under services/ have one shape, and the built-in tools are what their
manifests declare.

A family is a package with a `manifests.py`: beside it a `service.py` whose `service(...)` builds
the Service, and optionally store.py (Postgres), ops.py (pure logic), config.py (settings),
errors.py (its tool error codes). `sdk/`, `netguard/`, `plugins/`, `upstreams/` are libraries and
hosts (the last two serve tools the registry holds, not tools of their own), and
`platforms/` holds what the three platform families under it share.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import services
from services.builtin import BUILTIN_TOOLS, FAMILIES, LLM_TOOLS
from services.files.config import FileSettings
from services.files.manifests import build as file_manifests
from services.llm.manifests import llm_manifest

SERVICES = Path(services.__file__).parent
NOT_FAMILIES = {"sdk", "netguard", "plugins", "upstreams", "platforms"}
# What a family may hold besides its manifests and service: the roles above, and modules for a
# concept of its own (named here so a new one is a decision, not an accident).
ROLES = {"__init__", "service", "manifests", "store", "ops", "config", "errors"}
CONCEPTS = {
    "agents": {"invocations", "protocol", "runtime", "schemas"},
    "browser": {"extract", "page"},
    "external_api": {"paths"},
    "files": {"media", "paths"},
    "llm": {"upstream"},
    "router": {"choose", "rules"},
    "templates": {"agents"},
    "wallet": {"chain", "keys", "wallet"},
}


def _families() -> dict[str, Path]:
    found = {}
    for info in pkgutil.walk_packages([str(SERVICES)], "services."):
        path = SERVICES.joinpath(*info.name.split(".")[1:])
        if info.ispkg and (path / "manifests.py").exists():
            found[info.name.removeprefix("services.")] = path
    return found


FAMILY_DIRS = _families()


def test_every_folder_under_services_is_a_family_or_a_library() -> None:
    folders = {p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()}
    platforms = {p.name for p in (SERVICES / "platforms").iterdir() if (p / "__init__.py").exists()}
    assert set(FAMILY_DIRS) == (folders - NOT_FAMILIES) | {f"platforms.{p}" for p in platforms}
    assert set(FAMILY_DIRS) == {
        "agents", "browser", "calendar", "data_query", "embeddings", "external_api", "files",
        "llm", "math", "memory", "projects", "router", "search", "tasks", "templates", "text",
        "wallet", "platforms.energy", "platforms.greenfood", "platforms.water"}


def test_each_family_has_the_one_shape() -> None:
    for name, path in FAMILY_DIRS.items():
        modules = {p.stem for p in path.glob("*.py")}
        assert {"__init__", "service", "manifests"} <= modules, name
        assert modules - ROLES == CONCEPTS.get(name.split(".")[-1], set()), name
        assert callable(importlib.import_module(f"services.{name}.service").service), name
        manifests = importlib.import_module(f"services.{name}.manifests")
        assert manifests.TOOL_IDS and all(isinstance(t, str) for t in manifests.TOOL_IDS), name
        if hasattr(manifests, "MANIFESTS"):
            assert manifests.TOOL_IDS == tuple(m.tool_id for m in manifests.MANIFESTS), name


def test_the_tool_ids_of_settings_built_manifests_are_the_declared_ones() -> None:
    from services.files.manifests import TOOL_IDS as FILE_TOOLS
    from services.llm.manifests import TOOL_IDS as LLM_IDS

    assert tuple(file_manifests(FileSettings.model_construct(max_bytes=1))) == FILE_TOOLS
    assert (llm_manifest(["some-model"], 256).tool_id,) == LLM_IDS


def test_the_builtin_tools_are_the_families_manifests() -> None:
    assert set(BUILTIN_TOOLS) == {
        "math", "text", "calendar", "memory", "embeddings",
        "task.list", "task.create", "task.get", "task.update", "task.complete", "task.assign",
        "project.list", "project.get", "project.create", "project.update",
        "search.index", "search.lite",
        "file.list", "file.read", "file.write", "file.delete",
        "template.list", "template.read", "template.create", "template.update", "template.delete",
        "data.query", "greenfood.order", "energy.meter.read", "water.usage.read",
        "water.valve.set", "browser.lite", "browser.full", "external_api.call", "router.route",
        "agent.invoke",
    }
    assert len(BUILTIN_TOOLS) == len(set(BUILTIN_TOOLS))
    assert LLM_TOOLS == ("llm.chat",)
    # Every family builtin_services starts is counted, and only those: llm (configured) and the
    # wallet (with a chain) start elsewhere.
    counted = {m.__name__.removeprefix("services.").removesuffix(".manifests") for m in FAMILIES}
    assert counted == set(FAMILY_DIRS) - {"llm", "wallet"}
