"""The catalog entry of greenfood.order: one input schema, each op with its own fields."""

from __future__ import annotations

from typing import Any

from services.sdk import Cost
from services.sdk.service import make_manifest

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

MANIFESTS = (MANIFEST,)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
