"""Category D `greenfood.order`: the GREENFOOD platform's orders, inventory, prices and stock."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import asyncpg

from services.platforms.platform import platform_service
from services.sdk import CallContext, Cost, Service, ToolError
from services.sdk.service import ToolResult, make_manifest

STOCK_MAX = 2_147_483_647  # greenfood_products.stock is an integer column
PRICE_MAX = 1_000_000

_PRODUCT_ID = {"type": "string", "maxLength": 64, "pattern": "^[a-z][a-z0-9_-]{0,63}$"}
_PRICE = {"type": "number", "minimum": 0, "maximum": PRICE_MAX}


def _op(name: str, **fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["op", *fields],
        "properties": {"op": {"const": name}, **fields},
    }


OP_SCHEMAS: dict[str, dict[str, Any]] = {
    "create_order": _op(
        "create_order",
        product_id=_PRODUCT_ID,
        qty={"type": "integer", "minimum": 1, "maximum": 1000},
    ),
    "get_inventory": _op("get_inventory"),
    "set_price": _op("set_price", product_id=_PRODUCT_ID, price=_PRICE),
    "adjust_stock": _op(
        "adjust_stock",
        product_id=_PRODUCT_ID,
        delta={"type": "integer", "minimum": -100_000, "maximum": 100_000},
    ),
}

_OUTPUTS: list[dict[str, Any]] = [
    {
        "type": "object",
        "required": ["order_id", "status", "product_id", "qty"],
        "properties": {
            "order_id": {"type": "string"},
            "status": {"const": "created"},
            "product_id": {"type": "string"},
            "qty": {"type": "integer"},
        },
    },
    {
        "type": "object",
        "required": ["products"],
        "properties": {
            "products": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["product_id", "name", "price", "stock"],
                    "properties": {
                        "product_id": {"type": "string"},
                        "name": {"type": "string"},
                        "price": {"type": "number"},
                        "stock": {"type": "integer"},
                    },
                },
            }
        },
    },
    {
        "type": "object",
        "required": ["product_id", "price"],
        "properties": {"product_id": {"type": "string"}, "price": {"type": "number"}},
    },
    {
        "type": "object",
        "required": ["product_id", "stock"],
        "properties": {"product_id": {"type": "string"}, "stock": {"type": "integer"}},
    },
]

MANIFEST = make_manifest(
    {
        "tool_id": "greenfood.order",
        "version": "1.0.0",
        "category": "D",
        "action": "write",
        "description": "GREENFOOD platform: op create_order (product_id, qty) places an order; "
        "get_inventory lists products; set_price and adjust_stock are for operators.",
        # Dispatch on `op` with if/then rather than oneOf: a bad call is then reported against
        # its own op's schema ("$.qty: 0 is less than...") instead of "valid under none".
        "input_schema": {
            "type": "object",
            "required": ["op"],
            # Every field any op takes, bounded; each op's own schema then narrows them.
            "properties": {"op": {"enum": list(OP_SCHEMAS)},
                           **{k: v for op in OP_SCHEMAS.values()
                              for k, v in op["properties"].items() if k != "op"}},
            "additionalProperties": False,
            "allOf": [
                {"if": {"required": ["op"], "properties": {"op": {"const": op}}}, "then": schema}
                for op, schema in OP_SCHEMAS.items()
            ],
        },
        "output_schema": {"type": "object", "anyOf": _OUTPUTS},
        "cost": Cost(per_call=0.01),
        "network": False,
        "requires_approval": True,
        "timeout_ms": 5_000,
    }
)

OpHandler = Callable[[asyncpg.Connection, dict[str, Any], CallContext], Awaitable[dict[str, Any]]]


def _unknown(product_id: str) -> ToolError:
    return ToolError(f"unknown product {product_id!r}")


async def _locked_stock(conn: asyncpg.Connection, product_id: str) -> int:
    """Lock the product row for this transaction (within the platform's lock timeout)."""
    stock = await conn.fetchval(
        "SELECT stock FROM greenfood_products WHERE product_id = $1 FOR UPDATE", product_id
    )
    if stock is None:
        raise _unknown(product_id)
    return int(stock)


async def _create_order(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> ToolResult:
    product_id: str = args["product_id"]
    qty = int(args["qty"])
    stock = await _locked_stock(conn, product_id)
    if stock < qty:
        raise ToolError(f"insufficient stock: {product_id} has {stock}, {qty} requested")
    order_id = uuid.uuid4()
    await conn.execute(
        "UPDATE greenfood_products SET stock = stock - $2 WHERE product_id = $1", product_id, qty
    )
    await conn.execute(
        "INSERT INTO greenfood_orders (order_id, team_id, agent_id, product_id, qty)"
        " VALUES ($1, $2, $3, $4, $5)",
        order_id,
        ctx.team_id,
        ctx.agent_id,
        product_id,
        qty,
    )
    return ToolResult(
        output={"order_id": str(order_id), "status": "created", "product_id": product_id, "qty": qty},
        object_refs=[{"type": "greenfood.order", "id": str(order_id)}],
    )


async def _get_inventory(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    rows = await conn.fetch(
        "SELECT product_id, name, price, stock FROM greenfood_products"
        " ORDER BY product_id LIMIT 500"
    )
    products = [
        {
            "product_id": r["product_id"],
            "name": r["name"],
            "price": float(r["price"]),
            "stock": r["stock"],
        }
        for r in rows
    ]
    return {"products": products}


async def _set_price(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    product_id: str = args["product_id"]
    price = Decimal(str(args["price"]))
    if price != price.quantize(Decimal("0.01")):
        raise ToolError("price must have at most two decimal places")
    stored = await conn.fetchval(
        "UPDATE greenfood_products SET price = $2 WHERE product_id = $1 RETURNING price",
        product_id,
        price,
    )
    if stored is None:
        raise _unknown(product_id)
    return {"product_id": product_id, "price": float(stored)}


async def _adjust_stock(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    product_id: str = args["product_id"]
    stock = await _locked_stock(conn, product_id) + int(args["delta"])
    if stock < 0:
        raise ToolError(f"stock of {product_id} cannot go below 0 (would be {stock})")
    if stock > STOCK_MAX:
        raise ToolError(f"stock of {product_id} cannot exceed {STOCK_MAX}")
    await conn.execute(
        "UPDATE greenfood_products SET stock = $2 WHERE product_id = $1", product_id, stock
    )
    return {"product_id": product_id, "stock": stock}


OPS: dict[str, OpHandler] = {
    "create_order": _create_order,
    "get_inventory": _get_inventory,
    "set_price": _set_price,
    "adjust_stock": _adjust_stock,
}


async def _order(conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext) -> dict[str, Any] | ToolResult:
    return await OPS[args["op"]](conn, args, ctx)


def service(pool: asyncpg.Pool) -> Service:
    """The GREENFOOD service, bound to one connection pool."""
    return platform_service("greenfood", pool, [(MANIFEST, _order)])
