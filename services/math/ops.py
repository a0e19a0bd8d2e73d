"""A safe arithmetic evaluator: parse with ast, walk a whitelist of nodes, bound every result."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass

Number = int | float

MAX_EXPR_CHARS = 1_000
MAX_NODES = 200
MAX_EXPONENT = 1_000
MAX_INT_DIGITS = 1_000
MAX_FACTORIAL = 170
MAX_ROUND_DIGITS = 100
# Floats at or below 2**53 are exact integers; above it `int(x)` would invent digits.
EXACT_FLOAT_INT = 2**53
_INT_LIMIT = 10**MAX_INT_DIGITS  # an int is too large when abs(n) >= this (more than 1000 digits)

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_ALLOWED = "only numbers, + - * / // % **, parentheses, pi, e, tau and the listed functions"


class MathError(ValueError):
    """An expression that is not allowed, not well formed, or whose value is out of bounds."""


@dataclass(frozen=True, slots=True)
class _Function:
    impl: Callable[..., Number]
    min_args: int
    max_args: int


def _factorial(x: Number) -> int:
    n = _integral(x, "factorial")
    if not 0 <= n <= MAX_FACTORIAL:
        raise MathError(f"factorial needs an integer between 0 and {MAX_FACTORIAL}")
    return math.factorial(n)


def _round(x: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(x)
    n = _integral(ndigits, "round's second argument")
    if abs(n) > MAX_ROUND_DIGITS:
        raise MathError(f"round's second argument must be within ±{MAX_ROUND_DIGITS}")
    return round(x, n)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _integral(x: Number, what: str) -> int:
    if isinstance(x, int):
        return x
    if x.is_integer():
        return int(x)
    raise MathError(f"{what} needs an integer, got {x!r}")


FUNCTIONS: dict[str, _Function] = {
    "sqrt": _Function(math.sqrt, 1, 1),
    "sin": _Function(math.sin, 1, 1),
    "cos": _Function(math.cos, 1, 1),
    "tan": _Function(math.tan, 1, 1),
    "asin": _Function(math.asin, 1, 1),
    "acos": _Function(math.acos, 1, 1),
    "atan": _Function(math.atan, 1, 1),
    "atan2": _Function(math.atan2, 2, 2),
    "log": _Function(_log, 1, 2),
    "log10": _Function(math.log10, 1, 1),
    "log2": _Function(math.log2, 1, 1),
    "exp": _Function(math.exp, 1, 1),
    "abs": _Function(abs, 1, 1),
    "round": _Function(_round, 1, 2),
    "floor": _Function(math.floor, 1, 1),
    "ceil": _Function(math.ceil, 1, 1),
    "min": _Function(lambda *a: min(a), 1, 50),
    "max": _Function(lambda *a: max(a), 1, 50),
    "hypot": _Function(math.hypot, 1, 50),
    "factorial": _Function(_factorial, 1, 1),
}

_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
    ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
}
_REFUSED_OPERATORS: dict[type[ast.AST], str] = {
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
    ast.MatMult: "@", ast.Invert: "~", ast.Not: "not",
}
# Friendly names for the node kinds agents most often try; anything else falls back to its class.
_REFUSED_NODES: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts", ast.Slice: "slices",
    ast.Lambda: "lambdas", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
    ast.Compare: "comparisons", ast.BoolOp: "boolean operators ('and', 'or')",
    ast.IfExp: "conditional expressions", ast.NamedExpr: "assignments",
    ast.List: "lists", ast.Tuple: "tuples", ast.Set: "sets", ast.Dict: "dicts",
    ast.JoinedStr: "f-strings", ast.Starred: "starred arguments", ast.Await: "await expressions",
    ast.Yield: "yield expressions", ast.YieldFrom: "yield expressions",
}


def evaluate(expr: str) -> Number:
    """Evaluate an arithmetic expression; int when the value is an exact integer, else float."""
    if not isinstance(expr, str):
        raise MathError("the expression must be a string")
    source = expr.strip()
    if not source:
        raise MathError("the expression is empty")
    if len(source) > MAX_EXPR_CHARS:
        raise MathError(f"the expression is longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise MathError(f"invalid expression: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise MathError("the expression is nested too deeply") from None
    nodes = sum(1 for n in ast.walk(tree.body) if isinstance(n, ast.expr))
    if nodes > MAX_NODES:
        raise MathError(f"the expression has more than {MAX_NODES} terms")
    return _result(_eval(tree.body))


def _result(value: Number) -> Number:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MathError("the result is not a finite number")
        if value.is_integer() and abs(value) <= EXACT_FLOAT_INT:
            return int(value)
    return value


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in FUNCTIONS:
            raise MathError(f"{node.id} is a function: call it, e.g. {node.id}(x)")
        raise MathError(f"name {node.id!r} is not allowed (allowed: {', '.join(CONSTANTS)})")
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        raise _refused_operator(node.op)
    if isinstance(node, ast.BinOp):
        symbol = _BINARY.get(type(node.op))
        if symbol is None:
            raise _refused_operator(node.op)
        return _binary(symbol, _eval(node.left), _eval(node.right))
    if isinstance(node, ast.Call):
        return _call(node)
    what = _REFUSED_NODES.get(type(node), f"{type(node).__name__} expressions")
    raise MathError(f"{what}: not allowed ({_ALLOWED})")


def _refused_operator(op: ast.AST) -> MathError:
    return MathError(f"operator {_REFUSED_OPERATORS.get(type(op), '?')!r} is not allowed")


def _constant(value: object) -> Number:
    if isinstance(value, bool):
        raise MathError("booleans are not allowed")
    if isinstance(value, int | float):
        return _checked(value)
    if isinstance(value, str | bytes):
        raise MathError("strings are not allowed")
    if isinstance(value, complex):
        raise MathError("complex numbers are not allowed")
    raise MathError(f"the constant {value!r} is not allowed")


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        raise MathError("only calls of the allowed functions by name are allowed")
    name = node.func.id
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise MathError(f"function {name!r} is not allowed (allowed: {', '.join(FUNCTIONS)})")
    if node.keywords:
        raise MathError("keyword arguments are not allowed")
    if not fn.min_args <= len(node.args) <= fn.max_args:
        count = f"{fn.min_args}" if fn.min_args == fn.max_args else f"{fn.min_args}-{fn.max_args}"
        raise MathError(f"{name} takes {count} argument(s), got {len(node.args)}")
    args = [_eval(a) for a in node.args]
    return _apply(name, lambda: fn.impl(*args))


def _binary(symbol: str, a: Number, b: Number) -> Number:
    if symbol == "**":
        return _power(a, b)
    ops: dict[str, Callable[[Number, Number], Number]] = {
        "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
        "/": lambda x, y: x / y, "//": lambda x, y: x // y, "%": lambda x, y: x % y,
    }
    return _apply(symbol, lambda: ops[symbol](a, b))


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise MathError(f"exponents are limited to ±{MAX_EXPONENT}")
    if base == 0 and exponent < 0:
        raise MathError("division by zero")
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        # Estimate the digits before computing so 10**1000**... never allocates a huge int.
        if abs(base) > 1 and exponent * math.log10(abs(base)) > MAX_INT_DIGITS + 1:
            raise MathError(f"the result has more than {MAX_INT_DIGITS} digits")
        return _checked(base**exponent)
    # math.pow: a negative base with a fractional exponent is a domain error, not a complex.
    return _apply("**", lambda: math.pow(base, exponent))


def _apply(what: str, compute: Callable[[], Number]) -> Number:
    try:
        return _checked(compute())
    except ZeroDivisionError:
        raise MathError("division by zero") from None
    except OverflowError:
        raise MathError(f"the result of {what} is too large") from None
    except ValueError as exc:
        if isinstance(exc, MathError):
            raise
        raise MathError(f"math domain error in {what}") from None
    except TypeError:
        raise MathError(f"invalid arguments for {what}") from None


def _checked(value: Number) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MathError("the result is not a real number")
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise MathError(f"the result has more than {MAX_INT_DIGITS} digits")
    elif not math.isfinite(value):
        raise MathError("the result is not a finite number")
    return value
