"""Tool-name injection: wildcards, paths, spaces and look-alikes never reach NATS."""

from __future__ import annotations

import pytest

from wire.manifest import is_valid_tool_name
from tests.support.calls import invoke

HOSTILE = [
    ("math.>", 400),  # NATS full wildcard
    ("math.*", 400),  # NATS token wildcard
    ("*", 400),
    (">", 400),
    ("../x", 400),  # path traversal
    ("math/../../etc", 400),
    (" math", 400),
    ("math ", 400),
    ("ma th", 400),
    ("m\u0430th", 400),  # Cyrillic a: a look-alike of "math"
    ("\uff4d\uff41\uff54\uff48", 400),  # fullwidth letters
    ("MATH", 400),
    ("math\n", 400),
    ("math\x00", 400),
    ("math..x", 400),
    (".math", 400),
    ("math.", 400),
    ("1math", 400),
    ("a" * 65, 400),
    ("tools.math.invoke", 404),  # well-formed, but no such tool
    ("math.invoke", 404),
    ("a" * 64, 404),
]


@pytest.mark.parametrize("name, status", HOSTILE, ids=[repr(n)[:30] for n, _ in HOSTILE])
async def test_hostile_names_never_publish(client, token, team, bus_spy, name, status) -> None:
    got, body = await invoke(client, token(team=team), name, {"expr": "1"})
    assert got == status
    assert body["error"]["code"] == ("invalid_request" if status == 400 else "unknown_tool")
    await bus_spy.settle()
    assert bus_spy.subjects == []


def test_name_rule_itself() -> None:
    assert is_valid_tool_name("task.list")
    assert is_valid_tool_name("a" * 64)
    assert not is_valid_tool_name("a" * 65)
    assert not is_valid_tool_name("math\n")  # fullmatch, not match-then-$
    assert not is_valid_tool_name(None)
