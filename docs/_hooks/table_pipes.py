r"""MkDocs hook: a `\|` inside a code span of a table row renders as `|`, as on GitHub.

GitHub needs the backslash to keep a pipe inside a code span from splitting the row, and drops
it when rendering; Python-Markdown's tables already leave pipes in code spans alone and would
show the backslash."""

from __future__ import annotations

import re
from typing import Any

_CODE = re.compile(r"`[^`\n]+`")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return "\n".join(
        _CODE.sub(lambda m: m.group(0).replace("\\|", "|"), line) if line.lstrip().startswith("|")
        else line
        for line in markdown.split("\n")
    )
