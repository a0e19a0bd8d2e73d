"""Media types of stored files: given by the caller or guessed from the name; text or not."""

from __future__ import annotations

import mimetypes

# The interpreter's built-in table only: the same guess on every machine (the module-level
# functions also read /etc/mime.types).
_TYPES = mimetypes.MimeTypes()
# Common in a team's storage, and missing from older interpreters' tables.
for _type, _ext in (("text/markdown", ".md"), ("text/markdown", ".markdown"),
                    ("application/yaml", ".yaml"), ("application/yaml", ".yml"),
                    ("application/toml", ".toml"), ("application/x-ndjson", ".ndjson")):
    _TYPES.add_type(_type, _ext)

MEDIA_TYPE_PATTERN = "^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$"
_TEXT_APPLICATIONS = {"application/json", "application/xml", "application/javascript",
                      "application/x-ndjson", "application/yaml", "application/toml",
                      "application/x-sh", "application/sql"}


def media_type_for(path: str, given: str | None, *, text: bool) -> str:
    if given is not None:
        return given.lower()
    guessed, _ = _TYPES.guess_type(path, strict=False)
    if guessed is not None:
        return guessed
    return "text/plain" if text else "application/octet-stream"


def is_textual(media_type: str) -> bool:
    return (media_type.startswith("text/") or media_type in _TEXT_APPLICATIONS
            or media_type.endswith(("+json", "+xml")))


def utf8_prefix(data: bytes) -> str | None:
    """The longest whole-character UTF-8 text at the start of `data` (a cut may split the
    last character), or None if it is not UTF-8 text (a NUL byte says binary)."""
    if b"\x00" in data:
        return None
    for cut in range(0, 4):
        end = len(data) - cut
        if end < 0:
            break
        try:
            return data[:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < end - 3:  # an error before the last character: not UTF-8 at all
                return None
    return None
