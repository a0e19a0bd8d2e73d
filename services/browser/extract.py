"""A page's title, readable text and links, without running anything (selectolax, Lexbor)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

MAX_LINKS = 200
MAX_LINK_TEXT = 200
MAX_LINK_URL = 2048
MAX_TITLE = 500

# Never text: code, styles, embedded documents and what only shows without scripts.
_DROPPED = ["script", "style", "noscript", "template", "svg", "math", "iframe", "object",
            "embed", "canvas", "head"]
# Elements that start a new line of readable text.
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th",
    "tr", "ul",
})
# Lexbor (like the HTML spec) walks the stack of open elements for many start tags, so a
# document nesting thousands of unclosed elements costs quadratic time: parsing stops at the
# 128th level (real pages stay far below), by a cheap linear estimate: start tags minus end
# tags, leaving out void elements and those whose end tag is implied.
MAX_NESTING = 128
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]{0,30})", re.ASCII)
_NOT_NESTING = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "p", "li", "dt", "dd", "option", "optgroup", "rb", "rt", "rtc", "rp",
    "tr", "td", "th", "thead", "tbody", "tfoot", "colgroup", "caption", "html", "head", "body",
})
_BLOCK_SELECTOR = ",".join(sorted(_BLOCKS))
_BREAK = "\ue000"
_SPACES = re.compile(r"[ \t\f\v\r\u00a0]+")
_BLANK_LINES = re.compile(r"\n(\s*\n)+")


@dataclass(slots=True)
class Page:
    title: str = ""
    text: str = ""
    links: list[dict[str, str]] = field(default_factory=list)
    cut: bool = False  # the document nested too deep: only its beginning was read

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "text": self.text, "links": self.links}


def readable(text: str) -> str:
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n", "\n".join(lines)).strip()


def cap_nesting(html: str, limit: int = MAX_NESTING) -> tuple[str, bool]:
    """The document up to where its estimated nesting passes `limit` (and whether it was cut)."""
    depth = 0
    for m in _TAG.finditer(html):
        if m.group(2).lower() in _NOT_NESTING:
            continue
        if m.group(1):
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > limit:
                return html[: m.start()], True
    return html, False


def extract_html(html: str, base_url: str) -> Page:
    html, cut = cap_nesting(html)
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = readable(title_node.text()) if title_node is not None else ""
    links = _links(tree, base_url)
    tree.strip_tags(_DROPPED)
    root = tree.body or tree.root
    text = ""
    if root is not None:
        # Source line breaks are spaces in HTML; lines come from block elements, marked on
        # both sides with a private-use character before the text is taken.
        for node in root.css(_BLOCK_SELECTOR):
            node.insert_before(_BREAK)
            node.insert_after(_BREAK)
        text = root.text(separator="").replace("\n", " ").replace(_BREAK, "\n")
    return Page(title=title[:MAX_TITLE], text=readable(text), links=links, cut=cut)


def extract_text(text: str) -> Page:
    return Page(text=text.replace("\r\n", "\n").strip())


def _links(tree: LexborHTMLParser, base_url: str) -> list[dict[str, str]]:
    base = base_url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip()
        if href:
            base = urljoin(base_url, href)
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    for a in tree.css("a[href]"):
        href = (a.attributes.get("href") or "").strip()
        if not href or href.startswith("#"):
            continue
        try:
            url = urljoin(base, href)
            scheme = urlsplit(url).scheme.lower()
        except ValueError:
            continue
        url = url.split("#", 1)[0]
        if scheme not in ("http", "https") or len(url) > MAX_LINK_URL or url in seen:
            continue
        seen.add(url)
        out.append({"url": url, "text": readable(a.text())[:MAX_LINK_TEXT]})
        if len(out) >= MAX_LINKS:
            break
    return out
