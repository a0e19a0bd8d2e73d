"""Unit tests of the category-A tools: pure logic, handlers (direct and via the SDK), manifests."""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import time
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from services.calendar import ops as calendar_ops
from services.embeddings import ops as embedding_hash
from services.math import ops as math_eval
from services.memory import ops as memory_summary
from services.text import ops as text_ops
from services.calendar.service import calendar_tool
from services.embeddings.service import embeddings_tool
from services.math.service import math_tool
from services.math.service import output as math_output
from services.memory.service import memory_tool
from services.sdk import CallContext, ToolError
from services.sdk.service import ToolDef
from services.text.service import text_tool
from tests.support.tool_harness import run_tool

SERVICE_MODULES = {
    "math": "services.math.service",
    "text": "services.text.service",
    "calendar": "services.calendar.service",
    "memory": "services.memory.service",
    "embeddings": "services.embeddings.service",
}


def ctx() -> CallContext:
    return CallContext(
        call_id="call-1", decision_id="dec-1", team_id="t_1", agent_id="a_1",
        run_id=None, deadline=time.time() + 2.0,
    )


async def call(tool_def: ToolDef, args: dict[str, Any]) -> dict[str, Any]:
    """Call a handler directly; its output must match the declared output schema and survive
    the wire encoding (orjson refuses integers beyond 64 bits)."""
    result = await tool_def.handler(args, ctx())
    assert isinstance(result, dict)
    Draft202012Validator(tool_def.manifest.output_schema).validate(result)
    assert orjson.loads(orjson.dumps(result)) == result
    return result


def invalid(message: str) -> dict[str, Any]:
    """The SDK's reply to args that do not match the tool's input schema."""
    return {"ok": False, "error": {"code": "invalid_args", "message": f"invalid args: {message}"}}


# ---------------------------------------------------------------- math

MATH_VALUES = [
    ("precedence: * before +", "2+3*4", 14),
    ("parentheses first", "(2+3)*4", 20),
    ("** binds tighter than unary minus", "-2**2", -4),
    ("** is right-associative", "2**3**2", 512),
    ("true division gives a float", "7/2", 3.5),
    ("exact integer float becomes int", "6/3", 2),
    ("floor division rounds down", "-7//2", -4),
    ("modulo", "7%3", 1),
    ("float arithmetic is IEEE", "0.1+0.2", 0.30000000000000004),
    ("negative exponent", "2**-2", 0.25),
    ("unary plus", "+5", 5),
    ("whitespace and newlines inside parens", " (1 +\n 2) ", 3),
    ("pi constant", "pi", 3.141592653589793),
    ("tau constant", "tau", 6.283185307179586),
    ("sqrt exact", "sqrt(16)", 4),
    ("sqrt irrational", "sqrt(2)", 1.4142135623730951),
    ("log with base", "log(8, 2)", 3),
    ("natural log of e", "log(e)", 1),
    ("log10", "log10(1000)", 3),
    ("atan2", "atan2(1, 1)", 0.7853981633974483),
    ("hypot", "hypot(3, 4)", 5),
    ("round to digits", "round(2.567, 2)", 2.57),
    ("round half to even", "round(2.5)", 2),
    ("floor of negative", "floor(-2.5)", -3),
    ("ceil", "ceil(2.1)", 3),
    ("min and max mixed types", "max(1.5, min(3, 2))", 2),
    ("abs", "abs(-3)", 3),
    ("factorial", "factorial(5)", 120),
    ("fractional power", "4**0.5", 2),
    ("exact big integer stays exact", "2**62 + 1", 4611686018427387905),
    ("1000-digit intermediate is fine", "10**999 // 10**998", 10),
]


@pytest.mark.parametrize(("note", "expr", "expected"), MATH_VALUES, ids=[c[0] for c in MATH_VALUES])
def test_math_values(note: str, expr: str, expected: int | float) -> None:
    value = math_eval.evaluate(expr)
    assert value == expected, note
    assert type(value) is type(expected), note


MATH_REJECTIONS = [
    ("names are not builtins", "__import__('os')", "function '__import__' is not allowed"),
    ("unknown name", "x + 1", "name 'x' is not allowed"),
    ("attribute access", "(1).__class__", "attribute access"),
    ("dunder chain", "().__class__.__bases__[0]", "subscripts: not allowed"),
    ("method call", "a.b()", "only calls of the allowed functions"),
    ("huge exponent", "2**100000", "exponents are limited"),
    ("tower of exponents", "9**9**9", "exponents are limited"),
    ("too many digits", "10**999 * 10", "more than 1000 digits"),
    ("too many digits by pow", "99**999", "more than 1000 digits"),
    ("long expression", "1+" * 500 + "1", "longer than 1000 characters"),
    ("too many terms", "+".join(["1"] * 201), "more than 200 terms"),
    ("deep nesting", "(" * 300 + "1" + ")" * 300, "invalid expression"),
    ("division by zero", "1/0", "division by zero"),
    ("modulo by zero", "5 % 0", "division by zero"),
    ("floor division by zero", "5 // 0.0", "division by zero"),
    ("zero to a negative power", "0**-1", "division by zero"),
    ("strings", "'a' * 3", "strings are not allowed"),
    ("lambda", "(lambda: 1)()", "only calls of the allowed functions"),
    ("bare lambda", "lambda: 1", "lambdas: not allowed"),
    ("booleans", "True + 1", "booleans are not allowed"),
    ("complex", "1j", "complex numbers are not allowed"),
    ("comprehension", "[x for x in (1, 2)]", "comprehensions: not allowed"),
    ("subscript", "(1, 2)[0]", "subscripts: not allowed"),
    ("comparison", "1 < 2", "comparisons: not allowed"),
    ("conditional", "1 if 2 else 3", "conditional expressions: not allowed"),
    ("walrus", "(x := 1)", "assignments: not allowed"),
    ("bit shift", "1 << 10", "operator '<<' is not allowed"),
    ("not", "not 1", "operator 'not' is not allowed"),
    ("keyword arguments", "round(2.5, ndigits=1)", "keyword arguments are not allowed"),
    ("starred arguments", "max(*(1, 2))", "starred arguments: not allowed"),
    ("arity", "sqrt(1, 2)", "sqrt takes 1 argument(s), got 2"),
    ("function without call", "sqrt + 1", "sqrt is a function"),
    ("float overflow", "1e308 * 10", "not a finite number"),
    ("exp overflow", "exp(1000)", "too large"),
    ("domain error", "sqrt(-1)", "math domain error in sqrt"),
    ("negative base fractional power is not complex", "(-8)**(1/3)", "math domain error"),
    ("factorial bound", "factorial(171)", "between 0 and 170"),
    ("factorial needs an integer", "factorial(2.5)", "needs an integer"),
    ("syntax error", "2 +* 3", "invalid expression"),
    ("empty", "   ", "empty"),
    ("statements", "import os", "invalid expression"),
    ("null byte", "1\x00", "invalid expression"),
]


@pytest.mark.parametrize(
    ("note", "expr", "message"), MATH_REJECTIONS, ids=[c[0] for c in MATH_REJECTIONS]
)
def test_math_rejections(note: str, expr: str, message: str) -> None:
    with pytest.raises(math_eval.MathError) as info:
        math_eval.evaluate(expr)
    assert message in str(info.value), note


def test_math_evaluator_never_uses_eval_exec_or_compile() -> None:
    tree = ast.parse(inspect.getsource(math_eval))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"eval", "exec", "compile", "__import__"}


def test_math_output_keeps_numbers_json_safe() -> None:
    assert math_output(14) == {"value": 14}
    assert math_output(2**63 - 1) == {"value": 2**63 - 1}
    assert math_output(2**64) == {"value": 1.8446744073709552e19, "exact": "18446744073709551616"}
    with pytest.raises(ToolError, match="401 digits"):
        math_output(10**400)


async def test_math_handler() -> None:
    assert await call(math_tool, {"expr": "2+3*4"}) == {"value": 14}
    assert await call(math_tool, {"expr": "2**100"}) == {
        "value": 1.2676506002282294e30, "exact": "1267650600228229401496703205376"}
    with pytest.raises(ToolError, match="division by zero"):
        await call(math_tool, {"expr": "1/0"})
    with pytest.raises(ToolError, match="exponents are limited"):
        await call(math_tool, {"expr": "9**9**9"})


async def test_math_through_the_sdk() -> None:
    ok = {"ok": True, "output": {"value": 14}}
    assert await run_tool(math_tool, {"expr": "2+3*4"}, ctx()) == ok
    assert await run_tool(math_tool, {"expr": "1/0"}, ctx()) == {
        "ok": False, "error": {"code": "tool_error", "message": "division by zero"}}
    assert await run_tool(math_tool, {"expr": 2}, ctx()) == invalid(
        "$.expr: 2 is not of type 'string'")
    assert await run_tool(math_tool, {"expr": "1", "extra": True}, ctx()) == invalid(
        "$: Additional properties are not allowed ('extra' was unexpected)")


# ---------------------------------------------------------------- text

TEXT_CASES = [
    ("upper", {"op": "upper", "text": "Straße"}, {"text": "STRASSE"}),
    ("lower", {"op": "lower", "text": "ÉCOLE"}, {"text": "école"}),
    ("title keeps apostrophes", {"op": "title", "text": "they're HERE"}, {"text": "They're Here"}),
    ("trim", {"op": "trim", "text": " \t hi \n"}, {"text": "hi"}),
    ("truncate with default ellipsis", {"op": "truncate", "text": "hello world", "max_length": 8},
     {"text": "hello w…", "truncated": True}),
    ("truncate custom ellipsis", {"op": "truncate", "text": "hello world", "max_length": 8,
                                  "ellipsis": "..."}, {"text": "hello...", "truncated": True}),
    ("truncate short text unchanged", {"op": "truncate", "text": "hi", "max_length": 8},
     {"text": "hi", "truncated": False}),
    ("truncate below ellipsis length", {"op": "truncate", "text": "hello", "max_length": 2,
                                        "ellipsis": "..."}, {"text": "..", "truncated": True}),
    ("slugify folds accents and symbols", {"op": "slugify", "text": "  Héllo, Wörld! ﬁ — 2026 "},
     {"text": "hello-world-fi-2026"}),
    ("slugify of symbols only", {"op": "slugify", "text": "¡¿!?"}, {"text": ""}),
    ("word_count joins apostrophes and hyphens",
     {"op": "word_count", "text": "Don't stop the e-mail, 3 times!"}, {"count": 6}),
    ("char_count counts code points", {"op": "char_count", "text": "héllo👋"}, {"count": 6}),
    ("regex_find with groups", {"op": "regex_find", "text": "a1 b22", "pattern": r"([a-z])(\d+)"},
     {"matches": [{"match": "a1", "start": 0, "end": 2, "groups": ["a", "1"]},
                  {"match": "b22", "start": 3, "end": 6, "groups": ["b", "22"]}],
      "truncated": False}),
    ("regex_find unmatched group is null", {"op": "regex_find", "text": "b", "pattern": "(x)?b"},
     {"matches": [{"match": "b", "start": 0, "end": 1, "groups": [None]}], "truncated": False}),
    ("regex_find flags", {"op": "regex_find", "text": "Ab\nab", "pattern": "^ab$",
                          "flags": ["ignorecase", "multiline"]},
     {"matches": [{"match": "Ab", "start": 0, "end": 2, "groups": []},
                  {"match": "ab", "start": 3, "end": 5, "groups": []}], "truncated": False}),
    ("regex_find max_matches truncates", {"op": "regex_find", "text": "aaaa", "pattern": "a",
                                          "max_matches": 2},
     {"matches": [{"match": "a", "start": 0, "end": 1, "groups": []},
                  {"match": "a", "start": 1, "end": 2, "groups": []}], "truncated": True}),
]


@pytest.mark.parametrize(("note", "args", "expected"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
async def test_text_ops(note: str, args: dict[str, Any], expected: dict[str, Any]) -> None:
    assert await call(text_tool, args) == expected, note


# Rejected by the input schema, before the handler runs; long values are cut at 200 characters.
TEXT_INVALID_ARGS = [
    ("unknown op", {"op": "reverse", "text": "x"},
     "$.op: 'reverse' is not one of ['upper', 'lower', 'title', 'trim', 'truncate', 'slugify', "
     "'word_count', 'char_count', 'regex_find']"),
    ("missing max_length", {"op": "truncate", "text": "x"},
     "$: 'max_length' is a required property"),
    ("param of another op", {"op": "upper", "text": "x", "pattern": "a"},
     "$: False schema does not allow 'a'"),
    ("unknown flag", {"op": "regex_find", "text": "x", "pattern": "x", "flags": ["verbose"]},
     "$.flags[0]: 'verbose' is not one of ['ignorecase', 'multiline', 'dotall']"),
    ("pattern too long", {"op": "regex_find", "text": "x", "pattern": "a" * 501},
     "$.pattern: '" + "a" * 198 + "…"),
    ("text too long", {"op": "upper", "text": "x" * 100_001}, "$.text: '" + "x" * 198 + "…"),
]


@pytest.mark.parametrize(
    ("note", "args", "message"), TEXT_INVALID_ARGS, ids=[c[0] for c in TEXT_INVALID_ARGS]
)
async def test_text_invalid_args(note: str, args: dict[str, Any], message: str) -> None:
    assert await run_tool(text_tool, args, ctx()) == invalid(message), note


TEXT_REJECTIONS = [
    ("invalid pattern", {"op": "regex_find", "text": "x", "pattern": "("}, "invalid pattern"),
    ("compile-time blowup",
     {"op": "regex_find", "text": "x", "pattern": "(?:(?:a{100}){100}){100}"},
     "counted repetitions"),
    ("inline verbose flag", {"op": "regex_find", "text": "x", "pattern": "(?x)a{1 0 0 0}"},
     "inline verbose"),
]


@pytest.mark.parametrize(
    ("note", "args", "message"), TEXT_REJECTIONS, ids=[c[0] for c in TEXT_REJECTIONS]
)
async def test_text_rejections(note: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as info:
        await call(text_tool, args)
    assert message in info.value.message, note


async def test_text_catastrophic_regex_ends_as_tool_error() -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match="took longer than 0.5 s"):
        await call(text_tool, {"op": "regex_find", "text": "a" * 40 + "b", "pattern": "(a|aa)+$"})
    # Unbounded, this backtracking takes minutes; the timeout ends it (a generous bound: a
    # loaded machine stretches even a 0.5 s timeout).
    assert time.monotonic() - started < 10.0


async def test_text_classic_redos_pattern_finishes_fast() -> None:
    # `regex` optimizes (a+)+$ (no exponential backtracking); whatever the engine does, the call
    # must end within the timeout.
    started = time.monotonic()
    args = {"op": "regex_find", "text": "a" * 30 + "b", "pattern": "(a+)+$"}
    result = await call(text_tool, args)
    assert result == {"matches": [], "truncated": False}
    assert time.monotonic() - started < 1.0


def test_text_pattern_expansion_bound() -> None:
    uuid = "[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"
    assert text_ops.expansion(uuid) == 60 * 8 * 4 * 4 * 4 * 12
    text_ops.compile_pattern(uuid, [])  # ordinary counted patterns stay allowed
    assert text_ops.expansion("(?:a{1000}){1000}") > text_ops.MAX_PATTERN_EXPANSION


# ---------------------------------------------------------------- calendar

CALENDAR_CASES = [
    ("convert just before the New York spring-forward",
     {"op": "convert", "datetime": "2026-03-08T06:59:00Z", "to_tz": "America/New_York"},
     {"datetime": "2026-03-08T01:59:00-05:00", "tz_abbreviation": "EST"}),
    ("convert at the New York spring-forward: 02:00 EST is 03:00 EDT",
     {"op": "convert", "datetime": "2026-03-08T07:00:00Z", "to_tz": "America/New_York"},
     {"datetime": "2026-03-08T03:00:00-04:00", "tz_abbreviation": "EDT"}),
    ("New York is on DST, London not yet: 4 h apart",
     {"op": "convert", "datetime": "2026-03-08T12:00", "from_tz": "America/New_York",
      "to_tz": "Europe/London"},
     {"datetime": "2026-03-08T16:00:00+00:00", "tz": "Europe/London"}),
    ("half-hour zone",
     {"op": "convert", "datetime": "2026-03-08T12:00:00-04:00", "to_tz": "Asia/Kolkata"},
     {"datetime": "2026-03-08T21:30:00+05:30"}),
    ("an explicit offset wins over from_tz",
     {"op": "convert", "datetime": "2026-03-08T12:00:00+00:00", "from_tz": "Asia/Tokyo",
      "to_tz": "UTC"},
     {"datetime": "2026-03-08T12:00:00+00:00"}),
    ("parse a skipped wall time moves forward by the gap",
     {"op": "parse", "datetime": "2026-03-08 02:30", "tz": "America/New_York"},
     {"datetime": "2026-03-08T03:30:00-04:00", "weekday": "Sunday", "iso_weekday": 7}),
    ("parse a repeated wall time takes the first occurrence",
     {"op": "parse", "datetime": "2026-11-01T01:30", "tz": "America/New_York"},
     {"datetime": "2026-11-01T01:30:00-04:00", "utc_offset": "-04:00"}),
    ("parse Z as UTC with timestamp",
     {"op": "parse", "datetime": "2026-03-08T12:00:00Z"},
     {"datetime": "2026-03-08T12:00:00+00:00", "tz": "UTC", "timestamp": 1772971200}),
    ("parse a common English format",
     {"op": "parse", "datetime": "March 8, 2026 2:30 PM", "tz": "Europe/Paris"},
     {"datetime": "2026-03-08T14:30:00+01:00", "date": "2026-03-08", "time": "14:30:00"}),
    ("parse RFC 2822",
     {"op": "parse", "datetime": "Sun, 08 Mar 2026 12:00:00 +0100"},
     {"datetime": "2026-03-08T12:00:00+01:00", "utc_offset": "+01:00"}),
    ("add 1 day across spring-forward keeps the wall clock",
     {"op": "add", "datetime": "2026-03-07T12:00", "duration": "P1D", "tz": "America/New_York"},
     {"datetime": "2026-03-08T12:00:00-04:00"}),
    ("add 24 hours across spring-forward is elapsed time",
     {"op": "add", "datetime": "2026-03-07T12:00", "duration": {"hours": 24},
      "tz": "America/New_York"},
     {"datetime": "2026-03-08T13:00:00-04:00"}),
    ("add 1 hour through the gap",
     {"op": "add", "datetime": "2026-03-08T01:30", "duration": "PT1H", "tz": "America/New_York"},
     {"datetime": "2026-03-08T03:30:00-04:00"}),
    ("add a month clamps to the month's end",
     {"op": "add", "datetime": "2026-01-31", "duration": {"months": 1}},
     {"datetime": "2026-02-28T00:00:00+00:00", "weekday": "Saturday"}),
    ("subtract weeks with an ISO duration",
     {"op": "add", "datetime": "2026-01-01T08:00:00+01:00", "duration": "-P1W"},
     {"datetime": "2025-12-25T08:00:00+01:00"}),
    ("format with English names and ISO week",
     {"op": "format", "datetime": "2026-03-08T14:05:09-05:00",
      "format": "%A %d %B %Y, %I:%M %p (%z) week %V %%"},
     {"text": "Sunday 08 March 2026, 02:05 PM (-0500) week 10 %"}),
    ("format converts to tz first",
     {"op": "format", "datetime": "2026-03-08T12:00:00Z", "format": "%F %T %Z",
      "tz": "America/New_York"},
     {"text": "2026-03-08 08:00:00 EDT"}),
    ("format pads early years",
     {"op": "format", "datetime": "0005-01-01", "format": "%Y/%m/%d"}, {"text": "0005/01/01"}),
    ("business days in [start, end): one full week",
     {"op": "business_days", "start": "2026-03-02", "end": "2026-03-09"},
     {"business_days": 5, "holidays_excluded": 0}),
    ("business days with holidays (a Saturday holiday does not count)",
     {"op": "business_days", "start": "2026-12-21", "end": "2027-01-04",
      "holidays": ["2026-12-25", "2027-01-01", "2026-12-26", "2026-12-25"]},
     {"business_days": 8, "holidays_excluded": 2}),
    ("business days reversed are negative",
     {"op": "business_days", "start": "2026-03-09", "end": "2026-03-02"},
     {"business_days": -5, "holidays_excluded": 0}),
    ("business days over the whole calendar are O(1)",
     {"op": "business_days", "start": "0001-01-01", "end": "9999-12-31"},
     {"business_days": 2608614, "holidays_excluded": 0}),
    ("add business days skips the weekend",
     {"op": "add_business_days", "date": "2026-03-06", "days": 1},
     {"date": "2026-03-09", "weekday": "Monday"}),
    ("add business days skips a holiday and the weekend",
     {"op": "add_business_days", "date": "2026-12-24", "days": 1, "holidays": ["2026-12-25"]},
     {"date": "2026-12-28", "weekday": "Monday"}),
    ("add zero business days rolls a Saturday forward",
     {"op": "add_business_days", "date": "2026-03-07", "days": 0},
     {"date": "2026-03-09", "weekday": "Monday"}),
    ("negative business days go back",
     {"op": "add_business_days", "date": "2026-03-09", "days": -1},
     {"date": "2026-03-06", "weekday": "Friday"}),
]


@pytest.mark.parametrize(
    ("note", "args", "expected"), CALENDAR_CASES, ids=[c[0] for c in CALENDAR_CASES]
)
async def test_calendar(note: str, args: dict[str, Any], expected: dict[str, Any]) -> None:
    result = await call(calendar_tool, args)
    assert {k: result[k] for k in expected} == expected, note


def test_calendar_moment_shape() -> None:
    assert calendar_ops.parse("2026-03-08", "America/New_York") == {
        "datetime": "2026-03-08T00:00:00-05:00", "date": "2026-03-08", "time": "00:00:00",
        "weekday": "Sunday", "iso_weekday": 7, "utc_offset": "-05:00",
        "tz": "America/New_York", "tz_abbreviation": "EST", "timestamp": 1772946000,
    }


CALENDAR_REJECTIONS = [
    ("unknown zone", {"op": "convert", "datetime": "2026-03-08T12:00Z", "to_tz": "Mars/Olympus"},
     "unknown time zone 'Mars/Olympus'"),
    ("a zone directory is not a zone", {"op": "parse", "datetime": "2026-03-08", "tz": "America"},
     "unknown time zone 'America'"),
    ("ambiguous US/European numeric date", {"op": "parse", "datetime": "03/08/2026"},
     "unrecognized date/time"),
    ("impossible date", {"op": "parse", "datetime": "2026-02-30"}, "unrecognized date/time"),
    ("locale-dependent directive", {"op": "format", "datetime": "2026-03-08", "format": "%c"},
     "%c is not supported"),
    ("dangling percent", {"op": "format", "datetime": "2026-03-08", "format": "100%"},
     "is not supported"),
    ("past year 9999", {"op": "add", "datetime": "9999-12-31", "duration": "P1D"},
     "out of range (years 1..9999)"),
    ("before year 1", {"op": "add_business_days", "date": "0001-01-01", "days": -1},
     "out of range (years 1..9999)"),
    ("bad ISO duration", {"op": "add", "datetime": "2026-03-08", "duration": "P1X"},
     "not an ISO 8601 duration"),
    ("duration bound", {"op": "add", "datetime": "2026-03-08", "duration": "P99999Y"},
     "years is limited"),
    ("bad holiday", {"op": "business_days", "start": "2026-03-02", "end": "2026-03-09",
                     "holidays": ["2026-13-01"]}, "not a valid date"),
]


@pytest.mark.parametrize(
    ("note", "args", "message"), CALENDAR_REJECTIONS, ids=[c[0] for c in CALENDAR_REJECTIONS]
)
async def test_calendar_rejections(note: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as info:
        await call(calendar_tool, args)
    assert message in info.value.message, note


CALENDAR_INVALID_ARGS = [
    ("path traversal is not a zone", {"op": "parse", "datetime": "2026-03-08", "tz": "../etc"},
     "$.tz: '../etc' does not match '^[A-Za-z][A-Za-z0-9_+/-]*$'"),
    ("fractional days", {"op": "add", "datetime": "2026-03-08", "duration": {"days": 1.5}},
     "$.duration.days: 1.5 is not of type 'integer'"),
    ("param of another op", {"op": "parse", "datetime": "2026-03-08", "to_tz": "UTC"},
     "$: False schema does not allow 'UTC'"),
]


@pytest.mark.parametrize(
    ("note", "args", "message"), CALENDAR_INVALID_ARGS, ids=[c[0] for c in CALENDAR_INVALID_ARGS]
)
async def test_calendar_invalid_args(note: str, args: dict[str, Any], message: str) -> None:
    assert await run_tool(calendar_tool, args, ctx()) == invalid(message), note


# ---------------------------------------------------------------- memory

SALIENT_DOC = (
    "The tool proxy checks every call against the policy. "
    "Lunch was served at noon. "
    "Policy decisions of the tool proxy are logged, and every tool call is checked by policy. "
    "The weather was nice. "
    "Agents call the proxy for each tool."
)


async def test_memory_picks_the_salient_sentence() -> None:
    result = await call(memory_tool, {"text": SALIENT_DOC, "max_sentences": 1})
    assert result == {
        "summary": "Policy decisions of the tool proxy are logged, and every tool call is "
                   "checked by policy.",
        "sentences": ["Policy decisions of the tool proxy are logged, and every tool call is "
                      "checked by policy."],
        "sentence_count": 5,
    }


async def test_memory_keeps_original_order_and_is_deterministic() -> None:
    first = await call(memory_tool, {"text": SALIENT_DOC, "max_sentences": 2})
    assert first["sentences"] == [
        "The tool proxy checks every call against the policy.",
        "Policy decisions of the tool proxy are logged, and every tool call is checked by policy.",
    ]
    assert await call(memory_tool, {"text": SALIENT_DOC, "max_sentences": 2}) == first
    assert len((await call(memory_tool, {"text": SALIENT_DOC}))["sentences"]) == 3


def test_memory_sentence_splitting() -> None:
    text = (
        'Dr. Smith arrived at 9 a.m. on Monday. He said, "The proxy is ready!" Was it? yes.\n\n'
        "A heading without a period\n\nJ. R. R. Tolkien wrote books..."
    )
    assert memory_summary.split_sentences(text) == [
        "Dr. Smith arrived at 9 a.m. on Monday.",
        'He said, "The proxy is ready!"',
        "Was it? yes.",
        "A heading without a period",
        "J. R. R. Tolkien wrote books...",
    ]


async def test_memory_bounds() -> None:
    assert memory_summary.summarize("   ", 3) == memory_summary.Summary([], 0)
    assert await run_tool(memory_tool, {"text": "x", "max_sentences": 21}, ctx()) == invalid(
        "$.max_sentences: 21 is greater than the maximum of 20")
    assert await run_tool(memory_tool, {"text": "x" * 100_001}, ctx()) == invalid(
        "$.text: '" + "x" * 198 + "…")


# ---------------------------------------------------------------- embeddings


def test_embedding_recipe_is_frozen() -> None:
    vector = embedding_hash.embed("The cat sat on the mat")
    digest = hashlib.sha256(json.dumps(vector).encode()).hexdigest()
    assert digest == "e54e8f1a81900136a93df3c362bd0b12c8ed22b5ab55ded1fb5cc768bb945467"
    assert embedding_hash._slot("w:cat") == (189, 1.0)  # BLAKE2b, not the salted hash()


async def test_embeddings_deterministic_normalized_and_similar() -> None:
    texts = [
        "The cat sat on the mat",
        "A cat was sitting on the mat",
        "Quarterly revenue grew by eight percent",
        "",
    ]
    result = await call(embeddings_tool, {"texts": texts})
    assert result["model"] == "toolproxy-hash-v1" and result["dimensions"] == 256
    cat, cat2, revenue, empty = result["embeddings"]
    assert all(len(v) == 256 for v in result["embeddings"])
    assert abs(sum(x * x for x in cat) - 1.0) < 1e-5
    assert all(round(x, 6) == x for x in cat)
    assert empty == [0.0] * 256
    assert (await call(embeddings_tool, {"text": texts[0]}))["embeddings"] == [cat]
    assert embedding_hash.embed("THE CAT SAT ON THE MAT") == cat  # lowercased
    similar = embedding_hash.cosine(cat, cat2)
    unrelated = embedding_hash.cosine(cat, revenue)
    assert similar > 0.5 > 0.1 > unrelated


async def test_embeddings_bounds() -> None:
    assert await run_tool(embeddings_tool, {"text": "a", "texts": ["b"]}, ctx()) == invalid(
        "$: {'text': 'a', 'texts': ['b']} has too many properties")
    assert await run_tool(embeddings_tool, {}, ctx()) == invalid("$: {} should be non-empty")
    assert await run_tool(embeddings_tool, {"texts": ["x"] * 33}, ctx()) == invalid(
        "$.texts: [" + ", ".join(["'x'"] * 33) + "] is too long")
    # The total length is no schema keyword: the handler checks it.
    with pytest.raises(ToolError, match="100000 characters in total"):
        await call(embeddings_tool, {"texts": ["x" * 20_000] * 6})


# ---------------------------------------------------------------- manifests


def _unbounded(schema: Any, path: str = "$") -> list[str]:
    """Paths of strings without maxLength, arrays without maxItems, objects open to extras."""
    found: list[str] = []
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "string" and "maxLength" not in schema:
            found.append(path)
        if kind == "array" and "maxItems" not in schema:
            found.append(path)
        if kind == "object" and schema.get("additionalProperties") is not False:
            found.append(path)
        for key, value in schema.items():
            found += _unbounded(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += _unbounded(value, f"{path}[{i}]")
    return found


@pytest.mark.parametrize("name", list(SERVICE_MODULES))
def test_service_builds_with_a_strict_category_a_manifest(name: str) -> None:
    service = importlib.import_module(SERVICE_MODULES[name]).service()
    assert service.name == name
    assert [m.tool_id for m in service.manifests] == [name]
    manifest = service.manifests[0]
    assert (manifest.category, manifest.action, manifest.network) == ("A", "read", False)
    assert (manifest.risk, manifest.timeout_ms, manifest.requires_approval) == ("low", 2000, False)
    assert 0 < manifest.cost.per_call <= 0.0001
    assert manifest.capability == f"tool.{name}.invoke"
    Draft202012Validator.check_schema(manifest.input_schema)
    Draft202012Validator.check_schema(manifest.output_schema)
    assert _unbounded(manifest.input_schema) == []
    assert manifest.entry(available=True)["available"] is True
