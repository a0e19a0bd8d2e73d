"""The `calendar` tool (category A): parse, format, add, convert zones, business days."""

from __future__ import annotations

from typing import Any

from services.calendar import ops
from services.calendar.manifests import MANIFEST
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef


def run(args: dict[str, Any]) -> dict[str, Any]:
    """Apply one op to already validated args."""
    op = args["op"]
    if op == "parse":
        return ops.parse(args["datetime"], args.get("tz"))
    if op == "format":
        return {"text": ops.format_datetime(args["datetime"], args["format"], args.get("tz"))}
    if op == "add":
        return ops.add(args["datetime"], args["duration"], args.get("tz"))
    if op == "convert":
        return ops.convert(args["datetime"], args["to_tz"], args.get("from_tz"))
    if op == "business_days":
        return ops.business_days(args["start"], args["end"], args.get("holidays"))
    if op == "add_business_days":
        return ops.add_business_days(args["date"], args["days"], args.get("holidays"))
    raise ToolError(f"unknown op {op!r}")


async def _calendar(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    try:
        return run(args)
    except ops.CalendarError as exc:
        raise ToolError(str(exc)) from None


calendar_tool = ToolDef(manifest=MANIFEST, handler=_calendar)


def service() -> Service:
    return Service(name="calendar", tools=[calendar_tool])
