"""The `math` tool (category A): evaluate an arithmetic expression with the safe evaluator."""

from __future__ import annotations

from typing import Any

from services.math.manifests import MANIFEST
from services.math.ops import MathError, evaluate
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolDef

# JSON numbers travel through orjson, which refuses integers outside 64 bits: larger exact
# integers are returned as the nearest float plus their exact decimal digits.
_INT64 = 2**63


def output(value: int | float) -> dict[str, Any]:
    """The tool's output for a value, keeping every number representable in JSON."""
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        try:
            approx = float(value)
        except OverflowError:
            raise ToolError(
                f"the result has {len(str(abs(value)))} digits: too large for a JSON number"
            ) from None
        return {"value": approx, "exact": str(value)}
    return {"value": value}


async def _math(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    expr = args["expr"]
    try:
        return output(evaluate(expr))
    except MathError as exc:
        raise ToolError(str(exc)) from None


math_tool = ToolDef(manifest=MANIFEST, handler=_math)


def service() -> Service:
    return Service(name="math", tools=[math_tool])
