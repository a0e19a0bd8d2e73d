"""The catalog entries of chain.transfer {to, value_wei, chain_id?} and chain.call
{to, data, value_wei?, chain_id?} -> {tx_hash, status}; both prepared for their approval."""

from __future__ import annotations

from services.sdk import Cost
from services.sdk.service import make_manifest

MAX_CALLDATA_BYTES = 24 << 10

ADDRESS = {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "maxLength": 42,
           "description": "0x + 40 hex; mixed case must be a valid EIP-55 checksum"}
VALUE = {"type": "integer", "minimum": 0, "maximum": (1 << 63) - 1, "description": "in wei"}
CHAIN_ID = {"type": "integer", "minimum": 1, "maximum": (1 << 53) - 1,
            "description": "refused unless it is the wallet's chain"}
DATA = {"type": "string", "pattern": "^0x([0-9a-fA-F]{2})*$", "maxLength": 2 + 2 * MAX_CALLDATA_BYTES,
        "description": "calldata, 0x-prefixed hex"}

OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tx_hash", "status", "from", "nonce", "block_number"],
    "properties": {
        "tx_hash": {"type": "string", "pattern": "^0x[0-9a-f]{64}$"},
        "status": {"enum": ["success", "pending"],
                   "description": "pending: sent, not mined before the deadline"},
        "from": {"type": "string"},
        "nonce": {"type": "integer"},
        "block_number": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
}

_COMMON = {
    "version": "1.0.0",
    "category": "D",
    "action": "write",
    "output_schema": OUTPUT,
    "cost": Cost(per_call=0.05),
    "network": True,
    "requires_approval": True,
    "approval_preview": True,
    "timeout_ms": 10_000,
}

TRANSFER = make_manifest({
    **_COMMON,
    "tool_id": "chain.transfer",
    "description": "Send value (wei) from your team's wallet. Held for approval: governance sees "
    "the exact transaction (to, value, chain id, nonce, gas) and only that one is signed.",
    "input_schema": {
        "type": "object", "additionalProperties": False, "required": ["to", "value_wei"],
        "properties": {"to": ADDRESS, "value_wei": VALUE, "chain_id": CHAIN_ID},
    },
})

CALL = make_manifest({
    **_COMMON,
    "tool_id": "chain.call",
    "description": "Send a contract call (calldata, optional value) from your team's wallet. Held "
    "for approval like chain.transfer; a reverted transaction is reported as tx_reverted.",
    "input_schema": {
        "type": "object", "additionalProperties": False, "required": ["to", "data"],
        "properties": {"to": ADDRESS, "data": DATA, "value_wei": VALUE, "chain_id": CHAIN_ID},
    },
})

MANIFESTS = (TRANSFER, CALL)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)
