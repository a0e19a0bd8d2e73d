"""The README and docs/ follow the tree: every link and anchor resolves, every repository path
they name exists, the metrics and alerts they name are real, and the MkDocs site builds strictly."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
OTHERS = [ROOT / "bench" / "README.md", ROOT / "deploy" / "README.md"]  # beside the code they describe
ALL = [README, *PAGES, *(p for p in OTHERS if p.is_file())]

# Paths the docs name that are not in the repository, each with the reason. A prefix covers
# everything under it.
NOT_IN_TREE = {
    ".toolproxy/": "the data directory `toolproxy up` creates (kept out of git)",
    ".venv/": "the virtualenv `make up` and `make test` create",
    ".toolproxy-test-output/": "where the browser tests write their screenshots",
}
# Paths being made by a change in flight, each allowed while the path it replaces still stands.
COMING = {
    "proxy/core/pipeline/": "proxy/core/pipeline.py",  # issue 30: the pipeline as a folder of stages
}

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
PATH = re.compile(r"[\w.<>*…-]+(?:/[\w.<>*…{}-]*)+")
TOP_LEVEL = {p.name for p in ROOT.iterdir()}


def prose(path: Path) -> str:
    """The page without its fenced code blocks (commands and examples, not references)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def mkdocs_slug(text: str) -> str:
    """Python-Markdown's toc slugify, as MkDocs uses it."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def github_slug(text: str) -> str:
    """GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def heading_text(raw: str) -> str:
    """A heading as rendered text: code spans and emphasis unwrapped, links reduced to their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return text.replace("`", "").replace("**", "").replace("*", "")


def anchors(path: Path) -> tuple[set[str], set[str]]:
    texts = [heading_text(m.group(2)) for m in HEADING.finditer(prose(path))]
    return {mkdocs_slug(t) for t in texts}, {github_slug(t) for t in texts}


def links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("`x`", prose(path))  # a code span is not a link, nor holds one
    return [m.group(1) for m in LINK.finditer(text)]


def code_spans(path: Path) -> list[str]:
    return CODE_SPAN.findall(prose(path))


def repository_paths(path: Path) -> list[str]:
    """Backticked tokens that name a place in the tree: a path whose first segment is a
    top-level entry of the repository or a dot-directory."""
    found = []
    for span in code_spans(path):
        if not PATH.fullmatch(span):
            continue
        first = span.split("/", 1)[0]
        if first in TOP_LEVEL or first.startswith("."):
            found.append(span)
    return found


def exists(ref: str) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", ref).replace("…", "*")
    want_dir = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    if "*" not in pattern:
        target = ROOT / pattern
        return target.is_dir() if want_dir else target.exists()
    parts = pattern.split("/")
    candidates = [ROOT]
    for part in parts:
        candidates = [c / n.name for c in candidates if c.is_dir()
                      for n in c.iterdir() if fnmatch(n.name, part)]
    return any(c.is_dir() for c in candidates) if want_dir else bool(candidates)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_page_is_found() -> None:
    assert README.is_file() and len(PAGES) >= 20, "the README and docs/ are where they should be"


@pytest.mark.parametrize("page", ALL, ids=rel)
def test_links_and_anchors_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            broken += [f"{target}: link to a repository file relatively"] if target.startswith("/") else []
            continue
        where, _, anchor = target.partition("#")
        file = (page.parent / where).resolve() if where else page
        if not file.exists():
            broken.append(f"{target}: no such file")
            continue
        if ROOT not in file.parents and file != ROOT:
            broken.append(f"{target}: outside the repository")
            continue
        if anchor:
            if file.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
                continue
            mkdocs, github = anchors(file)
            if anchor not in mkdocs:
                broken.append(f"{target}: no heading with that anchor (MkDocs)")
            elif anchor not in github:
                broken.append(f"{target}: the heading's anchor differs on GitHub; reword the heading")
    assert not broken, f"{rel(page)}:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", ALL, ids=rel)
def test_repository_paths_exist(page: Path) -> None:
    missing = []
    for ref in repository_paths(page):
        if any(ref.startswith(prefix) for prefix in NOT_IN_TREE):
            continue
        if ref in COMING and (ROOT / COMING[ref]).exists():
            continue
        if not exists(ref):
            missing.append(ref)
    assert not missing, (f"{rel(page)} names paths that are not in the tree (moved? update the "
                         f"page, or list an example path in NOT_IN_TREE with its reason):\n"
                         + "\n".join(missing))


def test_the_path_check_sees_paths() -> None:
    """The check above is not vacuous: it finds the map's folders, globs and placeholders."""
    found = set(repository_paths(README))
    assert {"proxy/web/api/", "pdp/policies/*.rego", "services/<family>/", "tests/support/"} <= found
    assert exists("services/<family>/") and exists("pdp/policies/*.rego")
    assert not exists("services/no_such_family/") and not exists("pdp/policies/*.nothing")


def test_metrics_and_alerts_named_are_real() -> None:
    # Metrics are registered by the proxy and by the services' and plugin host's own server.
    source = "\n".join(p.read_text(encoding="utf-8") for top in ("proxy", "services", "infra")
                       for p in (ROOT / top).rglob("*.py"))
    alerts = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "deploy").rglob("*.yml"))
    classes = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "client").rglob("*.py"))
    unknown = []
    for page in ALL:
        for span in code_spans(page):
            metric = re.fullmatch(r"(toolproxy_[a-z_]+)(\{[^}]*\})?", span)
            if metric and f'"{metric.group(1)}"' not in source:
                unknown.append(f"{rel(page)}: metric {metric.group(1)}")
            if (re.fullmatch(r"Toolproxy[A-Z]\w+", span) and f"alert: {span}\n" not in alerts
                    and f"class {span}(" not in classes):  # the client's errors share the prefix
                unknown.append(f"{rel(page)}: alert {span}")
    assert not unknown, "\n".join(unknown)


def test_readme_keeps_the_two_commands_and_a_map() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make up " in text and "make test " in text
    assert "/v1/tools/invoke" in text, "a first call"
    spans = set(code_spans(README))
    # Done when a newcomer finds, from the README alone, where these live.
    for place in ("proxy/web/api/", "proxy/web/mcp/", "pdp/", "pdp/policies/*.rego",
                  "services/<family>/", "proxy/records/"):
        assert place in spans, place


def test_readme_links_every_page() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    unlinked = [rel(p) for p in PAGES if p.resolve() not in linked]
    assert not unlinked, f"pages the README does not link: {unlinked}"


def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is a dev extra (pip install -e '.[dev]')")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
