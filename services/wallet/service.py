"""The wallet's tools: `chain.transfer` {to, value_wei, chain_id?} and `chain.call`
{to, data, value_wei?, chain_id?} -> {tx_hash, status}; both prepared for their approval."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.sdk import CallContext, Cost, Service
from services.sdk.service import ToolDef, ToolResult, make_manifest
from services.wallet.chain import ChainClient
from services.wallet.config import WalletSettings
from services.wallet.keys import WalletKeys
from services.wallet.wallet import Wallet

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
        "block_number": {"type": ["integer", "null"]},
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

WALLET_TOOLS = ("chain.transfer", "chain.call")


def wallet_service(pool: asyncpg.Pool, keys: WalletKeys, chain: ChainClient, *,
                   gas_margin: float = 1.2) -> Service:
    wallet = Wallet(pool, keys, chain, gas_margin=gas_margin)
    defs = []
    for manifest in (TRANSFER, CALL):
        tool_id = manifest.tool_id

        async def invoke(args: dict[str, Any], ctx: CallContext, _t: str = tool_id) -> ToolResult:
            return await wallet.invoke(_t, args, ctx)

        async def prepare(args: dict[str, Any], ctx: CallContext, _t: str = tool_id) -> dict[str, Any]:
            return await wallet.prepare(_t, args, ctx)

        defs.append(ToolDef(manifest=manifest, handler=invoke, prepare=prepare))
    return Service(name="wallet", tools=defs)


def configured_wallet(pool: asyncpg.Pool, settings: WalletSettings | None = None
                      ) -> tuple[Service, ChainClient] | None:
    """The wallet as TOOLPROXY_CHAIN_RPC_URL and TOOLPROXY_WALLET_KEYS_FILE say, or None."""
    settings = settings or WalletSettings()
    if not settings.enabled:
        return None
    assert settings.chain_rpc_url is not None
    keys = (WalletKeys.from_file(settings.wallet_keys_file)
            if settings.wallet_keys_file is not None else WalletKeys())
    chain = ChainClient(settings.chain_rpc_url, timeout_s=settings.chain_rpc_timeout_s)
    return wallet_service(pool, keys, chain, gas_margin=settings.chain_gas_margin), chain
