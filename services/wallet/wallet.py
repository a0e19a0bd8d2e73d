"""The wallet's rules: prepare exactly one transaction per call, sign only the approved one (or
one a standing approval covers), submit it at most once, and check its receipt.

A sender's transactions are signed and sent one at a time across wallet replicas (a Postgres
advisory lock), so a nonce is read, signed and submitted without a race; a transaction is kept
signed in Postgres before it leaves, so a retry re-sends those same bytes and never signs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from eth_utils import is_checksum_address, to_checksum_address

from services.sdk import CallContext
from services.sdk.errors import Busy
from services.sdk.service import ToolResult
from services.wallet.chain import ChainClient, ChainRejected, ChainUnreachable, WouldRevert
from services.wallet.errors import (
    ChainUnavailable,
    InvalidAddress,
    NonceReplayed,
    NonceUnavailable,
    NoWallet,
    TxFailed,
    TxMismatch,
    TxNotApproved,
    TxNotPrepared,
    TxRejected,
    TxReverted,
    TxSubmissionUnknown,
    TxWouldFail,
    WrongChain,
)
from services.wallet.keys import WalletKeys
from services.wallet.store import EvmTransaction, StoredTx, TxStore

log = structlog.get_logger("toolproxy.wallet")

REPLY_MARGIN_S = 0.25  # of the call's deadline, kept to answer


@dataclass(frozen=True, slots=True)
class Intent:
    """What the agent asked for: the fields it controls."""

    to: str
    value_wei: int
    data: str
    chain_id: int | None

    @classmethod
    def of(cls, args: dict[str, Any]) -> Intent:
        to: str = args["to"]
        if to[2:] != to[2:].lower() and to[2:] != to[2:].upper() and not is_checksum_address(to):
            raise InvalidAddress(f"{to} fails its EIP-55 checksum")
        return cls(to=to_checksum_address(to), value_wei=int(args.get("value_wei", 0)),
                   data=str(args.get("data", "0x")).lower(), chain_id=args.get("chain_id"))

    def matches(self, tx: EvmTransaction) -> bool:
        return (tx.to == self.to and tx.value_wei == self.value_wei and tx.data == self.data
                and (self.chain_id is None or self.chain_id == tx.chain_id))


def _lock_key(tx_from: str, chain_id: int) -> int:
    digest = hashlib.sha256(f"wallet:{chain_id}:{tx_from}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Wallet:
    def __init__(self, pool: asyncpg.Pool, keys: WalletKeys, chain: ChainClient, *,
                 gas_margin: float = 1.2) -> None:
        self.store = TxStore(pool)
        self.keys = keys
        self.chain = chain
        self.gas_margin = gas_margin

    # --- prepare (a held call: what governance will see) ----------------------------------

    async def prepare(self, tool: str, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        intent = Intent.of(args)
        existing = await self.store.get(ctx.call_id)
        if existing is not None:  # asked again: the same transaction, never a second one
            self._check_same(existing, intent, ctx, tool)
            return existing.tx.preview()
        tx = await self._build(intent, ctx.team_id)
        stored = await self.store.prepared(call_id=ctx.call_id, team_id=ctx.team_id,
                                           agent_id=ctx.agent_id, tool=tool, kind="per_call", tx=tx)
        log.info("transaction_prepared", signing_hash=stored.signing_hash, nonce=tx.nonce)
        return stored.tx.preview()

    async def _build(self, intent: Intent, team_id: str) -> EvmTransaction:
        sender = self._sender(team_id)
        try:
            chain_id = await self.chain.chain_id()
            if intent.chain_id is not None and intent.chain_id != chain_id:
                raise WrongChain(f"the wallet's chain is {chain_id}, not {intent.chain_id}")
            nonce = await self.chain.pending_nonce(sender)
            estimate = await self.chain.estimate_gas(
                {"from": sender, "to": intent.to, "value": intent.value_wei, "data": intent.data})
            max_fee, tip = await self.chain.fees()
        except WouldRevert as exc:
            raise TxWouldFail(f"the transaction would fail: {exc}") from None
        except (ChainUnreachable, ChainRejected) as exc:
            raise ChainUnavailable(f"the chain cannot be reached: {exc}") from None
        return EvmTransaction(chain_id=chain_id, nonce=nonce, from_address=sender, to=intent.to,
                              value_wei=intent.value_wei, data=intent.data,
                              gas=int(estimate * self.gas_margin + 0.999), max_fee_per_gas=max_fee,
                              max_priority_fee_per_gas=tip)

    def _sender(self, team_id: str) -> str:
        sender = self.keys.address(team_id)
        if sender is None:
            raise NoWallet("this team has no wallet")
        return sender

    @staticmethod
    def _check_same(stored: StoredTx, intent: Intent, ctx: CallContext, tool: str) -> None:
        if stored.team_id != ctx.team_id or stored.tool != tool or not intent.matches(stored.tx):
            raise TxMismatch("the transaction differs from the one prepared for this call")

    # --- invoke (an approved call) -----------------------------------------------------------

    async def invoke(self, tool: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        intent = Intent.of(args)
        until = ctx.deadline - REPLY_MARGIN_S
        if ctx.approval == "per_call":
            stored = await self.store.get(ctx.call_id)
            if stored is None:
                raise TxNotPrepared("no transaction was prepared for this call")
            self._check_same(stored, intent, ctx, tool)
            # Bound to the hash governance approved, and the kept fields still hash to it.
            if ctx.approval_ref != stored.signing_hash or stored.tx.signing_hash() != stored.signing_hash:
                raise TxMismatch("the transaction differs from the approved one")
            if stored.state in ("prepared", "signing", "signed"):
                async with self._sender_lock(stored.tx.from_address, stored.tx.chain_id, until) as conn:
                    await self._submit(conn, stored.call_id)
        elif ctx.approval == "standing" and ctx.approval_ref:
            # Covered by a standing approval: built now, signed and sent under one hold of the
            # sender's lock (so concurrent calls get consecutive nonces).
            sender = self._sender(ctx.team_id)
            async with self._sender_lock(sender, await self._chain_id(), until) as conn:
                stored = await self.store.get(ctx.call_id)
                if stored is None:
                    tx = await self._build(intent, ctx.team_id)
                    stored = await self.store.prepared(call_id=ctx.call_id, team_id=ctx.team_id,
                                                       agent_id=ctx.agent_id, tool=tool,
                                                       kind="standing", tx=tx)
                else:
                    self._check_same(stored, intent, ctx, tool)
                await self._submit(conn, stored.call_id)
        else:
            raise TxNotApproved("the wallet signs approved transactions only")
        return await self._finish(stored.call_id, until)

    async def _chain_id(self) -> int:
        try:
            return await self.chain.chain_id()
        except (ChainUnreachable, ChainRejected) as exc:
            raise ChainUnavailable(f"the chain cannot be reached: {exc}") from None

    async def _submit(self, conn: asyncpg.Connection, call_id: str) -> None:
        """Under the sender's lock: sign and send once, or re-send the same signed bytes."""
        current = await self.store.get(call_id)
        assert current is not None
        if current.state in ("prepared", "signing"):
            await self._sign_and_send(conn, current)
        elif current.state == "signed":
            await self._resend(current)

    async def _finish(self, call_id: str, until: float) -> ToolResult:
        stored = await self.store.get(call_id)
        assert stored is not None
        if stored.state in ("refused", "failed"):
            raise TxFailed(_MESSAGES.get(stored.error_code or "", "the transaction failed"),
                           code=stored.error_code or None)
        if stored.state in ("prepared", "signing"):  # the chain could not be asked
            raise ChainUnavailable("the chain cannot be reached (nothing was sent)")
        assert stored.tx_hash is not None
        if stored.state == "mined":
            receipt = {"status": stored.receipt_status, "block_number": stored.block_number}
        else:
            # 'signed': the node never confirmed taking it, yet it may have (a lost answer).
            try:
                receipt = await self.chain.wait_receipt(
                    stored.tx_hash, until if stored.state == "sent" else 0.0)
            except (ChainUnreachable, ChainRejected):
                receipt = None
            if receipt is None and stored.state == "signed":
                raise TxSubmissionUnknown(
                    f"transaction {stored.tx_hash} is signed but the node did not confirm taking "
                    "it; the same call, retried, re-sends exactly it (never another)")
            if receipt is None:
                return _result(stored, "pending", None)
            await self.store.mark(stored.call_id, "mined", receipt=receipt)
        if receipt["status"] != 1:
            raise TxReverted(f"transaction {stored.tx_hash} was mined in block "
                             f"{receipt['block_number']} and reverted")
        return _result(stored, "success", receipt["block_number"])

    async def _sign_and_send(self, conn: asyncpg.Connection, stored: StoredTx) -> None:
        tx, call_id = stored.tx, stored.call_id
        await self.store.claim(conn, call_id)
        try:
            next_nonce = await self.chain.pending_nonce(tx.from_address)
        except (ChainUnreachable, ChainRejected) as exc:
            await self.store.mark(call_id, "prepared", conn=conn)  # nothing signed
            raise ChainUnavailable(f"the chain cannot be reached: {exc}") from None
        if next_nonce != tx.nonce:
            code = NonceReplayed.code if next_nonce > tx.nonce else NonceUnavailable.code
            await self.store.mark(call_id, "refused", error_code=code, conn=conn)
            return
        signed = self.keys.sign(stored.team_id, tx.signable())
        raw, tx_hash = "0x" + signed.raw_transaction.hex(), "0x" + signed.hash.hex()
        if not await self.store.signed(conn, call_id, raw, tx_hash):
            await self.store.mark(call_id, "refused", error_code=NonceReplayed.code, conn=conn)
            return
        try:
            await self.chain.send_raw(bytes.fromhex(raw[2:]))
        except ChainRejected as exc:
            log.warning("transaction_rejected", tx_hash=tx_hash, error=str(exc))
            await self.store.mark(call_id, "failed", error_code=TxRejected.code, conn=conn)
            return
        except ChainUnreachable as exc:
            log.warning("transaction_submission_unknown", tx_hash=tx_hash, error=str(exc))
            return  # stays 'signed': a retry re-sends these bytes
        await self.store.mark(call_id, "sent", conn=conn)
        log.info("transaction_sent", tx_hash=tx_hash, nonce=tx.nonce)

    async def _resend(self, stored: StoredTx) -> None:
        """A signed transaction whose submission is unknown: the same bytes again (a node
        treats them as one transaction: the same hash, the same nonce)."""
        assert stored.raw_tx is not None and stored.tx_hash is not None
        try:
            if await self.chain.receipt(stored.tx_hash) is None:
                await self.chain.send_raw(bytes.fromhex(stored.raw_tx[2:]))
        except ChainRejected as exc:
            text = str(exc).lower()
            if "known" in text:  # already in the node's pool
                await self.store.mark(stored.call_id, "sent")
                return
            if await self.chain.receipt(stored.tx_hash) is not None:
                await self.store.mark(stored.call_id, "sent")
                return
            code = NonceReplayed.code if "nonce" in text else TxRejected.code
            await self.store.mark(stored.call_id, "failed", error_code=code)
            return
        except ChainUnreachable:
            return
        await self.store.mark(stored.call_id, "sent")

    @contextlib.asynccontextmanager
    async def _sender_lock(self, sender: str, chain_id: int, until: float) -> AsyncIterator[asyncpg.Connection]:
        key = _lock_key(sender, chain_id)
        async with self.store.pool.acquire() as conn:
            while not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
                if time.time() >= until:
                    raise Busy("the wallet is busy with this sender's transactions")
                await asyncio.sleep(0.01)
            try:
                yield conn
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", key)


_MESSAGES = {
    NonceReplayed.code: "the approved transaction's nonce was used by another transaction: it "
                        "can no longer be sent as approved (nothing was sent); invoke again",
    NonceUnavailable.code: "the approved transaction's nonce is ahead of the chain (nothing was "
                           "sent)",
    TxRejected.code: "the node refused the transaction (nothing was sent)",
}


def _result(stored: StoredTx, status: str, block: int | None) -> ToolResult:
    assert stored.tx_hash is not None
    out: dict[str, Any] = {"tx_hash": stored.tx_hash, "status": status, "from": stored.tx.from_address,
                           "nonce": stored.tx.nonce, "block_number": block}
    return ToolResult(output=out, object_refs=[{"type": "chain.transaction", "id": stored.tx_hash}])
