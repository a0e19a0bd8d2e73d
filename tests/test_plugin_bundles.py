"""Bundles are read safely and manifests are validated field by field (no infrastructure)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from services.plugins.bundle import (
    MAX_FILES,
    check_plugin,
    load_bundle,
    pack_directory,
    read_archive,
)
from services.plugins.errors import BundleError, ManifestProblem
from tests.support.plugin_harness import EXAMPLES, plugin_files, tar_gz

KNOWN = {"greenfood", "math", "task", "text"}


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for m in members:
            payload = (data or {}).get(m.name)
            tar.addfile(m, io.BytesIO(payload) if payload is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, dict[str, bytes]]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, {name: data}


@pytest.mark.parametrize("name", ["/etc/plugin.json", "../plugin.json", "a/../../plugin.json",
                                  "a\\b.js", "dir/.../x", "a//" + "b" * 201])
def test_unsafe_paths_are_refused(name: str) -> None:
    info, data = _file(name)
    with pytest.raises(BundleError, match="unsafe path"):
        read_archive(_tar([info], data))


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_links_devices_and_fifos_are_refused(kind: bytes) -> None:
    info = tarfile.TarInfo("plugin.js")
    info.type = kind
    info.linkname = "/etc/passwd"
    with pytest.raises(BundleError, match="only regular files"):
        read_archive(_tar([info]))


def test_sizes_and_counts_are_bounded() -> None:
    big, data = _file("big.js", b"x" * (300 << 10))
    with pytest.raises(BundleError, match="larger than"):
        read_archive(_tar([big], data))
    many = {f"f{i}.js": b"1" for i in range(MAX_FILES + 1)}
    with pytest.raises(BundleError, match="more than"):
        read_archive(tar_gz(many))
    # A gzip bomb: tiny compressed, huge unpacked; reading stops at the bound.
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("plugin.js")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    assert len(bomb.getvalue()) < 512 << 10
    with pytest.raises(BundleError, match="larger than"):
        read_archive(bomb.getvalue())
    with pytest.raises(BundleError, match="not a readable"):
        read_archive(b"not a tarball at all")
    with pytest.raises(BundleError, match="exceeds"):
        read_archive(b"x" * (600 << 10))


def test_duplicates_are_refused_and_one_top_directory_is_accepted() -> None:
    a, da = _file("plugin.js", b"1")
    b, db = _file("./plugin.js", b"2")
    with pytest.raises(BundleError, match="twice"):
        read_archive(_tar([a, b], {**da, **db}))
    files = {f"wordfreq/{k}": v for k, v in plugin_files("x.y", "function invoke(){}").items()}
    assert sorted(read_archive(tar_gz(files)).files) == ["plugin.js", "plugin.json", "tool.json"]


def test_directories_pack_deterministically_and_links_are_refused(tmp_path: Path) -> None:
    a = pack_directory(EXAMPLES / "text_wordfreq")
    assert a == pack_directory(EXAMPLES / "text_wordfreq") == load_bundle(EXAMPLES / "text_wordfreq")
    plugin = check_plugin(read_archive(a), known_services=KNOWN)
    assert (plugin.manifest.name, plugin.tool.plugin, plugin.tool.category) == ("text.wordfreq", True, "A")
    (tmp_path / "plugin.js").symlink_to("/etc/passwd")
    with pytest.raises(BundleError, match="links"):
        pack_directory(tmp_path)


def _problem(files: dict[str, bytes]) -> ManifestProblem:
    with pytest.raises(ManifestProblem) as info:
        check_plugin(read_archive(tar_gz(files)), known_services=KNOWN)
    return info.value


def _with(files: dict[str, bytes], file: str, **changes: object) -> dict[str, bytes]:
    doc = json.loads(files[file])
    doc.update(changes)
    return {**files, file: json.dumps(doc).encode()}


BASE = plugin_files("demo.tool", "function invoke(){ return {} }", internal_api=["math"])


@pytest.mark.parametrize("changes, field", [
    ({"author": "me"}, "author"),
    ({"name": "Demo"}, "name"),
    ({"version": "1.0"}, "version"),
    ({"version": "01.0.0"}, "version"),
    ({"entry": "../plugin.js"}, "entry"),
    ({"entry": "plugin.py"}, "entry"),
    ({"capabilities": ["tool.math.invoke"]}, "capabilities[0]"),
    ({"capabilities": ["tool.demo.tool.invoke", "tool.demo.tool.invoke"]}, "capabilities"),
    ({"capabilities": []}, "capabilities"),
    ({"permissions": {"network": True, "filesystem": False, "internal_api": []}}, "permissions.network"),
    ({"permissions": {"network": False, "filesystem": True, "internal_api": []}}, "permissions.filesystem"),
    ({"permissions": {"network": False, "filesystem": False, "internal_api": ["nope"]}},
     "permissions.internal_api[0]"),
    ({"permissions": {"network": False, "filesystem": False, "internal_api": ["math", "Bad"]}},
     "permissions.internal_api[1]"),
    ({"permissions": {"network": False, "filesystem": False}}, "permissions.internal_api"),
    ({"permissions": {"network": "false", "filesystem": False, "internal_api": []}}, "permissions.network"),
    ({"permissions": {"network": False, "filesystem": False, "internal_api": [], "shell": False}},
     "permissions.shell"),
])
def test_plugin_json_refusals_name_the_field(changes: dict[str, object], field: str) -> None:
    problem = _problem(_with(BASE, "plugin.json", **changes))
    assert (problem.file, problem.field) == ("plugin.json", field)


@pytest.mark.parametrize("changes, field", [
    ({"tool_id": "other.tool"}, "tool_id"),
    ({"cost": 1}, "cost"),
    ({"category": "E"}, "category"),
    ({"action": "delete"}, "action"),
    ({"timeout_ms": 60_000}, "timeout_ms"),
    ({"input_schema": {"type": "object", "additionalProperties": False,
                       "properties": {"q": {"type": "string"}}}}, "input_schema.properties.q"),
    ({"input_schema": {"type": "object"}}, "input_schema"),
    ({"output_schema": {"type": "array"}}, "output_schema"),
])
def test_tool_json_refusals_name_the_field(changes: dict[str, object], field: str) -> None:
    problem = _problem(_with(BASE, "tool.json", **changes))
    assert (problem.file, problem.field) == ("tool.json", field), str(problem)


def test_missing_files_and_entry() -> None:
    assert _problem({k: v for k, v in BASE.items() if k != "tool.json"}).file == "tool.json"
    assert _problem({k: v for k, v in BASE.items() if k != "plugin.js"}).field == "entry"
    assert _problem({**BASE, "plugin.json": b"{not json"}).field == "(file)"


def test_the_greenfood_example_declares_its_internal_api() -> None:
    plugin = check_plugin(read_archive(load_bundle(EXAMPLES / "greenfood_plugin_order")),
                          known_services=KNOWN)
    assert plugin.manifest.internal_api == ("greenfood",)
    assert (plugin.tool.category, plugin.tool.action, plugin.tool.requires_approval) == ("D", "write", True)
    with pytest.raises(ManifestProblem, match="unknown internal API"):
        check_plugin(read_archive(load_bundle(EXAMPLES / "greenfood_plugin_order")),
                     known_services={"math"})
