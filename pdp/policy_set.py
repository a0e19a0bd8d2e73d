"""A set of Rego modules read from a directory, identified by a content hash (the revision)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ENTRYPOINT = "toolproxy/authz/decision"  # data.toolproxy.authz.decision
PACKAGE_PATH = "toolproxy.authz"


@dataclass(frozen=True)
class PolicySet:
    modules: dict[str, str]  # file name -> source; *_test.rego excluded
    tests: dict[str, str]  # *_test.rego

    @property
    def revision(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.modules):
            h.update(name.encode() + b"\0" + self.modules[name].encode() + b"\0")
        return h.hexdigest()[:16]


def default_policy_dir() -> Path:
    return Path(str(resources.files("pdp") / "policies"))


def load_policy_dir(path: Path | None = None) -> PolicySet:
    root = path or default_policy_dir()
    modules: dict[str, str] = {}
    tests: dict[str, str] = {}
    for f in sorted(root.glob("*.rego")):
        (tests if f.name.endswith("_test.rego") else modules)[f.name] = f.read_text()
    if not modules:
        raise FileNotFoundError(f"no .rego policies in {root}")
    return PolicySet(modules=modules, tests=tests)
