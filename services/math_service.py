"""The `math` tool (category A): evaluate an arithmetic expression with the safe evaluator."""

from __future__ import annotations

from typing import Any

from services.math_eval import CONSTANTS, FUNCTIONS, MAX_EXPR_CHARS, MathError, evaluate
from services.sdk import CallContext, Cost, Service, ToolError, tool

# JSON numbers travel through orjson, which refuses integers outside 64 bits: larger exact
# integers are returned as the nearest float plus their exact decimal digits.
_INT64 = 2**63

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expr": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_EXPR_CHARS,
            "description": (
                "An arithmetic expression: numbers, + - * / // % ** (|exponent| <= 1000), "
                f"parentheses, the constants {', '.join(CONSTANTS)} and the functions "
                f"{', '.join(FUNCTIONS)}. At most 200 terms; integers up to 1000 digits."
            ),
        },
    },
    "required": ["expr"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {
            "type": "number",
            "description": "An integer when the result is an exact integer, else a float.",
        },
        "exact": {
            "type": "string",
            "description": "All digits of an integer result beyond the 64-bit range.",
        },
    },
    "required": ["value"],
    "additionalProperties": False,
}

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


@tool(
    tool_id="math",
    version="1.0.0",
    category="A",
    action="read",
    description=(
        "Evaluate an arithmetic expression safely (no code execution), e.g. "
        '{"expr": "2+3*4"} -> {"value": 14}.'
    ),
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    cost=Cost(per_call=0.00002),
    network=False,
)
async def math_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    expr = args["expr"]
    try:
        return output(evaluate(expr))
    except MathError as exc:
        raise ToolError(str(exc)) from None


def service() -> Service:
    return Service(name="math", tools=[math_tool])
