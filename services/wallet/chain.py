"""The wallet's view of the chain: an Ethereum JSON-RPC endpoint (anvil, geth, a provider, or the
tests' in-process EVM behind the same protocol), reached through web3.py without retries."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from web3 import AsyncHTTPProvider, AsyncWeb3
from web3.exceptions import ContractLogicError, TransactionNotFound, Web3RPCError


class ChainUnreachable(Exception):
    """No answer (refused, timed out, a gateway error): a submission may or may not have landed."""


class ChainRejected(Exception):
    """The node answered with an error: nothing it was asked to do happened."""


class WouldRevert(Exception):
    """The node's estimate says the transaction would fail."""


def _rpc_message(exc: Web3RPCError) -> str:
    err = getattr(exc, "rpc_response", None) or {}
    message = (err.get("error") or {}).get("message") if isinstance(err, dict) else None
    return str(message or exc)[:300]


class ChainClient:
    def __init__(self, url: str, *, timeout_s: float = 5.0) -> None:
        self._provider = AsyncHTTPProvider(
            url, request_kwargs={"timeout": aiohttp.ClientTimeout(total=timeout_s)},
            exception_retry_configuration=None,  # a retried send is decided here, not below
        )
        self.w3 = AsyncWeb3(self._provider)
        self._chain_id: int | None = None

    async def close(self) -> None:
        await self._provider.disconnect()

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except (ContractLogicError, TransactionNotFound):
            raise
        except Web3RPCError as exc:
            raise ChainRejected(_rpc_message(exc)) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise ChainUnreachable(f"{type(exc).__name__}: {str(exc)[:200]}") from None

    async def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(await self._call(self.w3.eth.chain_id))
        return self._chain_id

    async def pending_nonce(self, address: str) -> int:
        """The next nonce the node accepts from this sender, counting its pending transactions."""
        return int(await self._call(self.w3.eth.get_transaction_count(address, "pending")))

    async def estimate_gas(self, tx: dict[str, Any]) -> int:
        try:
            return int(await self._call(self.w3.eth.estimate_gas(tx)))  # type: ignore[arg-type]
        except ContractLogicError as exc:
            raise WouldRevert(str(exc)[:300]) from None
        except ChainRejected as exc:  # some nodes answer a failing estimate as a plain error
            raise WouldRevert(str(exc)) from None

    async def fees(self) -> tuple[int, int]:
        """(max fee, priority fee) per gas for an EIP-1559 transaction: twice the base fee
        (room for six full blocks of rises) plus the node's suggested tip."""
        block = await self._call(self.w3.eth.get_block("latest"))
        tip = int(await self._call(self.w3.eth.max_priority_fee))
        return 2 * int(block["baseFeePerGas"]) + tip, tip

    async def send_raw(self, raw: bytes) -> str:
        return "0x" + bytes(await self._call(self.w3.eth.send_raw_transaction(raw))).hex()

    async def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            r = await self._call(self.w3.eth.get_transaction_receipt(tx_hash))  # type: ignore[arg-type]
        except TransactionNotFound:
            return None
        if r is None or r.get("blockNumber") is None:
            return None
        return {"status": int(r["status"]), "block_number": int(r["blockNumber"]),
                "gas_used": int(r["gasUsed"])}

    async def wait_receipt(self, tx_hash: str, until: float) -> dict[str, Any] | None:
        """Poll until a receipt or `until` (time.time()); None if not mined by then."""
        pause = 0.02
        while True:
            found = await self.receipt(tx_hash)
            if found is not None:
                return found
            if time.time() + pause >= until:
                return None
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)
