"""The GREENFOOD service: greenfood.order's four ops (create_order, get_inventory, set_price,
adjust_stock), each checked and then written through the store in the call's transaction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import asyncpg

from services.platforms.greenfood import store
from services.platforms.greenfood.manifests import MANIFEST, STOCK_MAX
from services.platforms.transaction import platform_service
from services.sdk import CallContext, Service, ToolError
from services.sdk.service import ToolResult

OpHandler = Callable[[asyncpg.Connection, dict[str, Any], CallContext], Awaitable[dict[str, Any]]]


def _unknown(product_id: str) -> ToolError:
    return ToolError(f"unknown product {product_id!r}")


async def _locked_stock(conn: asyncpg.Connection, product_id: str) -> int:
    stock = await store.locked_stock(conn, product_id)
    if stock is None:
        raise _unknown(product_id)
    return stock


async def _create_order(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> ToolResult:
    product_id: str = args["product_id"]
    qty = int(args["qty"])
    stock = await _locked_stock(conn, product_id)
    if stock < qty:
        raise ToolError(f"insufficient stock: {product_id} has {stock}, {qty} requested")
    order_id = await store.place_order(conn, product_id, qty, ctx.team_id, ctx.agent_id)
    return ToolResult(
        output={"order_id": str(order_id), "status": "created", "product_id": product_id, "qty": qty},
        object_refs=[{"type": "greenfood.order", "id": str(order_id)}],
    )


async def _get_inventory(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    return {"products": await store.inventory(conn)}


async def _set_price(
    conn: asyncpg.Connection, args: dict[str, Any], ctx: CallContext
) -> dict[str, Any]:
    product_id: str = args["product_id"]
    price = Decimal(str(args["price"]))
    if price != price.quantize(Decimal("0.01")):
        raise ToolError("price must have at most two decimal places")
    stored = await store.set_price(conn, product_id, price)
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
    await store.set_stock(conn, product_id, stock)
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
