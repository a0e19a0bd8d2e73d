"""A local Ethereum JSON-RPC node for tests and benches: an in-process EVM (eth-tester on py-evm)
behind the standard JSON-RPC wire format over HTTP on loopback — what the wallet also speaks
to anvil or geth. Only the methods the wallet and the tests use are served.

Fault switches (set by a test) for the next sendRawTransaction: the node refuses it with an
RPC error (`refuse_next_send`); it is lost on its way in, the client gets a gateway error
(`lose_next_send`); it is applied and its answer is lost (`drop_next_send_reply`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from eth_tester import EthereumTester, PyEVMBackend
from eth_tester.exceptions import TransactionFailed, TransactionNotFound
from eth_utils import to_checksum_address

from infra.embedded.ports import free_port
from tests.support.loopback import serve

# eth-tester's funded accounts use the private keys 1, 2, 3, ...
FUNDED_KEYS = [f"0x{i:064x}" for i in range(1, 11)]

# A contract for chain.call: stores the first calldata word in slot 0, once; a second call
# (slot already set) reverts, and so does a call without data.
#   runtime: CALLDATASIZE ISZERO PUSH1 0x12 JUMPI  PUSH1 0 SLOAD PUSH1 0x12 JUMPI
#            PUSH1 0 CALLDATALOAD PUSH1 0 SSTORE STOP  JUMPDEST PUSH1 0 DUP1 REVERT
RUNTIME = "361560125760005460125760003560005500" + "5b600080fd"
INIT = "6017600c60003960176000f3" + RUNTIME
# And one that stores the first calldata word every time (benches call it repeatedly):
#   PUSH1 0 CALLDATALOAD PUSH1 0 SSTORE STOP
STORE_INIT = "6007600c60003960076000f3" + "60003560005500"


def _q(value: int) -> str:
    return hex(int(value))


def _hexbytes(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    return str(value)


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ChainNode:
    def __init__(self) -> None:
        self.tester = EthereumTester(PyEVMBackend())
        self.chain_id = int(self.tester.backend.chain.chain_id)
        self.port = free_port()
        self.refuse_next_send = False
        self.lose_next_send = False
        self.drop_next_send_reply = False
        self.sends = 0  # raw transactions the node accepted
        self._lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[list[Any]], Any]] = {
            "eth_chainId": lambda p: _q(self.chain_id),
            "net_version": lambda p: str(self.chain_id),
            "eth_blockNumber": lambda p: _q(self.tester.get_block_by_number("latest")["number"]),
            "eth_getBlockByNumber": self._block,
            "eth_getTransactionCount": lambda p: _q(self.tester.get_nonce(p[0], self._tag(p, 1))),
            "eth_getBalance": lambda p: _q(self.tester.get_balance(p[0], self._tag(p, 1))),
            "eth_getCode": lambda p: _hexbytes(self.tester.get_code(p[0], self._tag(p, 1))),
            "eth_getStorageAt": self._storage,
            "eth_estimateGas": lambda p: _q(self.tester.estimate_gas(self._tx(p[0]), self._tag(p, 1))),
            "eth_call": lambda p: _hexbytes(self.tester.call(self._tx(p[0]), self._tag(p, 1))),
            "eth_gasPrice": lambda p: _q(self._base_fee() + 10**9),
            "eth_maxPriorityFeePerGas": lambda p: _q(10**9),
            "eth_sendRawTransaction": self._send,
            "eth_getTransactionReceipt": self._receipt,
        }

    # --- what tests use directly -----------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def balance(self, address: str) -> int:
        with self._lock:
            return int(self.tester.get_balance(to_checksum_address(address)))

    def nonce(self, address: str) -> int:
        with self._lock:
            return int(self.tester.get_nonce(to_checksum_address(address), "pending"))

    def storage(self, address: str, slot: int = 0) -> int:
        with self._lock:
            value = self.tester.get_storage_at(to_checksum_address(address), hex(slot))
            return int(value, 16) if isinstance(value, str) else int.from_bytes(value, "big")

    def fund(self, address: str, wei: int = 10**20) -> None:
        """Credits an account from the first funded one (eth-tester's unlocked accounts)."""
        with self._lock:
            self.tester.send_transaction({"from": self.tester.get_accounts()[0],
                                          "to": to_checksum_address(address), "value": wei,
                                          "gas": 21_000, "max_fee_per_gas": 10**10,
                                          "max_priority_fee_per_gas": 10**9})

    def deploy(self) -> str:
        """Deploys the one-shot storage contract from the last funded account; its address."""
        with self._lock:
            sender = self.tester.get_accounts()[-1]
            h = self.tester.send_transaction({"from": sender, "gas": 200_000, "data": "0x" + INIT,
                                              "value": 0, "max_fee_per_gas": 10**10,
                                              "max_priority_fee_per_gas": 10**9})
            return str(self.tester.get_transaction_receipt(h)["contract_address"])

    # --- the JSON-RPC methods ------------------------------------------------------------------

    @staticmethod
    def _tag(params: list[Any], i: int) -> Any:
        tag = params[i] if len(params) > i else "latest"
        return int(tag, 16) if isinstance(tag, str) and tag.startswith("0x") else tag

    @staticmethod
    def _tx(raw: dict[str, Any]) -> dict[str, Any]:
        names = {"from": "from", "to": "to", "value": "value", "data": "data", "input": "data",
                 "gas": "gas", "maxFeePerGas": "max_fee_per_gas",
                 "maxPriorityFeePerGas": "max_priority_fee_per_gas", "gasPrice": "gas_price",
                 "nonce": "nonce"}
        out: dict[str, Any] = {}
        for key, value in raw.items():
            name = names.get(key)
            if name is None:
                continue
            if name in ("from", "to", "data"):
                out[name] = value
            else:
                out[name] = int(value, 16) if isinstance(value, str) else int(value)
        return out

    def _base_fee(self) -> int:
        return int(self.tester.get_block_by_number("latest")["base_fee_per_gas"])

    def _block(self, params: list[Any]) -> dict[str, Any]:
        b = self.tester.get_block_by_number(self._tag(params, 0))
        return {
            "number": _q(b["number"]), "hash": _hexbytes(b["hash"]),
            "parentHash": _hexbytes(b["parent_hash"]), "timestamp": _q(b["timestamp"]),
            "gasLimit": _q(b["gas_limit"]), "gasUsed": _q(b["gas_used"]),
            "baseFeePerGas": _q(b["base_fee_per_gas"]), "miner": _hexbytes(b["coinbase"]),
            "transactions": [_hexbytes(t) for t in b["transactions"]],
            "extraData": _hexbytes(b["extra_data"]), "nonce": _hexbytes(b["nonce"]),
            "difficulty": _q(b["difficulty"]), "size": _q(b["size"]),
        }

    def _storage(self, params: list[Any]) -> str:
        value = self.tester.get_storage_at(params[0], hex(int(params[1], 16)), self._tag(params, 2))
        return _hexbytes(value)

    def _send(self, params: list[Any]) -> str:
        if self.refuse_next_send:
            self.refuse_next_send = False
            raise RpcError(-32000, "node refused the transaction (test switch)")
        try:
            tx_hash = self.tester.send_raw_transaction(params[0])
        except Exception as exc:  # py-evm's validation errors: as a node answers them
            text = str(exc)
            if "nonce" in text.lower():
                text = f"nonce too low: {text}"
            raise RpcError(-32000, text[:500]) from None
        self.sends += 1
        return _hexbytes(tx_hash)

    def _receipt(self, params: list[Any]) -> dict[str, Any] | None:
        try:
            r = self.tester.get_transaction_receipt(params[0])
        except TransactionNotFound:
            return None
        if r.get("block_number") is None:
            return None
        return {
            "transactionHash": _hexbytes(r["transaction_hash"]),
            "transactionIndex": _q(r["transaction_index"]),
            "blockHash": _hexbytes(r["block_hash"]), "blockNumber": _q(r["block_number"]),
            "from": _hexbytes(r["from"]), "to": _hexbytes(r["to"]) if r.get("to") else None,
            "cumulativeGasUsed": _q(r["cumulative_gas_used"]), "gasUsed": _q(r["gas_used"]),
            "effectiveGasPrice": _q(r.get("effective_gas_price") or 0),
            "contractAddress": _hexbytes(r["contract_address"]) if r.get("contract_address") else None,
            "logs": [], "logsBloom": "0x" + "00" * 256, "status": _q(r["status"]), "type": str(r.get("type") or "0x2"),
        }

    # --- the HTTP server ------------------------------------------------------------------------

    def _dispatch(self, request: dict[str, Any]) -> dict[str, Any]:
        rid = request.get("id")
        method = request.get("method")
        handler = self._methods.get(str(method))
        if handler is None:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}
        try:
            with self._lock:
                result = handler(list(request.get("params") or []))
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message}}
        except TransactionFailed as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": 3, "message": f"execution reverted: {exc}"}}
        except Exception as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": str(exc)[:500]}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if isinstance(body, list):
            return web.json_response([self._dispatch(b) for b in body])
        sending = body.get("method") == "eth_sendRawTransaction"
        if sending and self.lose_next_send:
            self.lose_next_send = False
            return web.Response(status=502, text="bad gateway (test switch)")
        drop = sending and self.drop_next_send_reply
        answer = await asyncio.to_thread(self._dispatch, body)
        if drop and "result" in answer:
            self.drop_next_send_reply = False
            # Applied, but the answer is lost on the way back (as behind a failing gateway).
            return web.Response(status=502, text="bad gateway (test switch)")
        return web.json_response(answer)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner, _ = await serve(app, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@contextlib.asynccontextmanager
async def chain_node() -> AsyncIterator[ChainNode]:
    node = ChainNode()
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


def main() -> None:
    """`python -m tests.support.chain_node --port N`: the node alone, until interrupted (benches)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    a = parser.parse_args()

    async def run() -> None:
        node = ChainNode()
        if a.port:
            node.port = a.port
        await node.start()
        print(f"chain node at {node.url} (chain id {node.chain_id})", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
