"""The SQL of greenfood.order: GREENFOOD's products (price, stock) and its orders, on the
call's connection (each call is one transaction)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import asyncpg


async def locked_stock(conn: asyncpg.Connection, product_id: str) -> int | None:
    """The product's stock (None: no such product), its row locked until the transaction ends
    (within the platform's lock timeout)."""
    stock = await conn.fetchval(
        "SELECT stock FROM greenfood_products WHERE product_id = $1 FOR UPDATE", product_id
    )
    return None if stock is None else int(stock)


async def place_order(conn: asyncpg.Connection, product_id: str, qty: int, team_id: str,
                      agent_id: str) -> uuid.UUID:
    """Take `qty` from the (locked) product's stock and record the order."""
    order_id = uuid.uuid4()
    await conn.execute(
        "UPDATE greenfood_products SET stock = stock - $2 WHERE product_id = $1", product_id, qty
    )
    await conn.execute(
        "INSERT INTO greenfood_orders (order_id, team_id, agent_id, product_id, qty)"
        " VALUES ($1, $2, $3, $4, $5)",
        order_id,
        team_id,
        agent_id,
        product_id,
        qty,
    )
    return order_id


async def inventory(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT product_id, name, price, stock FROM greenfood_products"
        " ORDER BY product_id LIMIT 500"
    )
    return [
        {
            "product_id": r["product_id"],
            "name": r["name"],
            "price": float(r["price"]),
            "stock": r["stock"],
        }
        for r in rows
    ]


async def set_price(conn: asyncpg.Connection, product_id: str, price: Decimal) -> Decimal | None:
    """The price as stored (None: no such product)."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        "UPDATE greenfood_products SET price = $2 WHERE product_id = $1 RETURNING price",
        product_id,
        price,
    )


async def set_stock(conn: asyncpg.Connection, product_id: str, stock: int) -> None:
    await conn.execute(
        "UPDATE greenfood_products SET stock = $2 WHERE product_id = $1", product_id, stock
    )
