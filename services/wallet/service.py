"""The wallet service: chain.transfer and chain.call, each prepared (what governance sees)
and invoked (signed and sent once approved) by the wallet; served only where a chain is
configured."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.sdk import CallContext, Service
from services.sdk.service import ToolDef, ToolResult
from services.wallet.chain import ChainClient
from services.wallet.config import WalletSettings
from services.wallet.keys import WalletKeys
from services.wallet.manifests import MANIFESTS
from services.wallet.wallet import Wallet


def service(pool: asyncpg.Pool, keys: WalletKeys, chain: ChainClient, *,
            gas_margin: float = 1.2) -> Service:
    wallet = Wallet(pool, keys, chain, gas_margin=gas_margin)
    defs = []
    for manifest in MANIFESTS:
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
    return service(pool, keys, chain, gas_margin=settings.chain_gas_margin), chain
