"""The catalog entry of `calendar`: one input schema, each op with its own parameters."""

from __future__ import annotations

from typing import Any

from services.calendar import ops
from services.sdk import Cost
from services.sdk.service import make_manifest

# Parameters each op takes (besides `op`), and which of them are required.
OP_PARAMS: dict[str, tuple[set[str], set[str]]] = {
    "parse": ({"datetime", "tz"}, {"datetime"}),
    "format": ({"datetime", "format", "tz"}, {"datetime", "format"}),
    "add": ({"datetime", "duration", "tz"}, {"datetime", "duration"}),
    "convert": ({"datetime", "from_tz", "to_tz"}, {"datetime", "to_tz"}),
    "business_days": ({"start", "end", "holidays"}, {"start", "end"}),
    "add_business_days": ({"date", "days", "holidays"}, {"date", "days"}),
}
_ALL_PARAMS = set().union(*(allowed for allowed, _ in OP_PARAMS.values()))


def _op_rules() -> list[dict[str, Any]]:
    """One if/then per op: its required params, and every other op's params forbidden."""
    rules = []
    for op, (allowed, required) in OP_PARAMS.items():
        then = {
            "properties": {p: False for p in sorted(_ALL_PARAMS - allowed)},
            "required": sorted(required),
        }
        rules.append(
            {"if": {"properties": {"op": {"const": op}}, "required": ["op"]}, "then": then}
        )
    return rules


_ZONE: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": ops.MAX_INPUT_CHARS,
    "pattern": "^[A-Za-z][A-Za-z0-9_+/-]*$",
    "description": "An IANA time zone, e.g. America/New_York, Europe/Paris, UTC.",
}
_DATE: dict[str, Any] = {
    "type": "string",
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "maxLength": 10,
    "description": "An ISO date YYYY-MM-DD.",
}
_DURATION_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {"type": "integer" if name in ("years", "months", "weeks", "days") else "number",
               "minimum": -limit, "maximum": limit}
        for name, limit in ops.DURATION_LIMITS.items()
    },
    "minProperties": 1,
    "additionalProperties": False,
}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op": {
            "enum": list(OP_PARAMS),
            "description": (
                "parse (datetime, tz?) | format (datetime, format, tz?) | add (datetime, duration, "
                "tz?) | convert (datetime, to_tz, from_tz?) -> a moment {datetime, date, time, "
                "weekday, iso_weekday, utc_offset, tz, tz_abbreviation, timestamp}, format -> "
                "{text}; business_days (start, end, holidays?) -> {business_days, "
                "holidays_excluded}; add_business_days (date, days, holidays?) -> {date, weekday}."
            ),
        },
        "datetime": {
            "type": "string",
            "minLength": 1,
            "maxLength": ops.MAX_INPUT_CHARS,
            "description": (
                "ISO 8601 (2026-03-08T12:00:00-05:00, 2026-03-08, ...Z), RFC 2822, 2026/03/08, "
                "08.03.2026 or 'March 8, 2026 2:30 PM'. Without an offset it is read as wall-clock "
                "time in tz (from_tz for convert), else UTC; skipped DST times move forward."
            ),
        },
        "tz": _ZONE,
        "from_tz": _ZONE,
        "to_tz": _ZONE,
        "format": {
            "type": "string",
            "minLength": 1,
            "maxLength": ops.MAX_FORMAT_CHARS,
            "description": "strftime-style, English names; directives: "
            + " ".join("%" + d for d in ops.DIRECTIVES),
        },
        "duration": {
            "description": (
                "An object {years, months, weeks, days, hours, minutes, seconds} (signed) or an "
                "ISO 8601 duration like P1DT2H or -P2W. Years, months, weeks and days move the "
                "wall clock in tz (09:00 stays 09:00 across DST, Jan 31 + 1 month = Feb 28); "
                "hours, minutes and seconds add elapsed time."
            ),
            "anyOf": [
                _DURATION_OBJECT,
                {"type": "string", "minLength": 2, "maxLength": ops.MAX_INPUT_CHARS},
            ],
        },
        "start": _DATE | {"description": "business_days: first day counted (inclusive)."},
        "end": _DATE | {"description": "business_days: end of the range (exclusive)."},
        "date": _DATE,
        "days": {
            "type": "integer",
            "minimum": -ops.MAX_BUSINESS_DAYS,
            "maximum": ops.MAX_BUSINESS_DAYS,
            "description": "add_business_days: Mon-Fri days to move (negative: backwards; "
            "0 rolls a weekend or holiday forward).",
        },
        "holidays": {"type": "array", "items": _DATE, "maxItems": ops.MAX_HOLIDAYS},
    },
    "required": ["op"],
    "additionalProperties": False,
    # Each op's own parameters: a rule across properties, which the proxy checks on every call
    # and the model-facing surfaces leave out of the schema they publish (not portable).
    "allOf": _op_rules(),
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "datetime": {"type": "string"},
        "date": {"type": "string"},
        "time": {"type": "string"},
        "weekday": {"type": "string"},
        "iso_weekday": {"type": "integer", "minimum": 1, "maximum": 7},
        "utc_offset": {"type": "string"},
        "tz": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tz_abbreviation": {"type": "string"},
        "timestamp": {"type": "number"},
        "text": {"type": "string"},
        "business_days": {"type": "integer"},
        "holidays_excluded": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}


MANIFEST = make_manifest({
    "tool_id": "calendar",
    "version": "1.0.0",
    "category": "A",
    "action": "read",
    "description": (
        "Dates and times with IANA time zones (DST-aware): parse, format, add a duration, "
        "convert between zones, count business days (Mon-Fri minus holidays) and add them."
    ),
    "input_schema": INPUT_SCHEMA,
    "output_schema": OUTPUT_SCHEMA,
    "cost": Cost(per_call=0.00002),
    "network": False,
})

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
