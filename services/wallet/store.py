"""A wallet transaction: its decoded form (what governance approves), the hash it is bound to,
and its durable states in Postgres (prepared -> signing -> signed -> sent -> mined, or refused /
failed with nothing sent)."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg
from eth_account.typed_transactions import TypedTransaction

KIND = "evm_transaction"


@dataclass(frozen=True, slots=True)
class EvmTransaction:
    """An EIP-1559 transaction, every field fixed before anyone approves it."""

    chain_id: int
    nonce: int
    from_address: str
    to: str
    value_wei: int
    data: str  # 0x-prefixed lowercase hex
    gas: int
    max_fee_per_gas: int
    max_priority_fee_per_gas: int

    def signable(self) -> dict[str, Any]:
        return {
            "type": 2, "chainId": self.chain_id, "nonce": self.nonce, "to": self.to,
            "value": self.value_wei, "data": bytes.fromhex(self.data[2:]), "gas": self.gas,
            "maxFeePerGas": self.max_fee_per_gas, "maxPriorityFeePerGas": self.max_priority_fee_per_gas,
        }

    def signing_hash(self) -> str:
        """The hash the key signs (EIP-1559 signing payload): what the approval is bound to."""
        return "0x" + TypedTransaction.from_dict(self.signable()).hash().hex()

    def decoded(self) -> dict[str, Any]:
        d = asdict(self)
        d["type"] = 2
        d["from"] = d.pop("from_address")
        return d

    @classmethod
    def from_decoded(cls, d: dict[str, Any]) -> EvmTransaction:
        return cls(chain_id=int(d["chain_id"]), nonce=int(d["nonce"]), from_address=str(d["from"]),
                   to=str(d["to"]), value_wei=int(d["value_wei"]), data=str(d["data"]),
                   gas=int(d["gas"]), max_fee_per_gas=int(d["max_fee_per_gas"]),
                   max_priority_fee_per_gas=int(d["max_priority_fee_per_gas"]))

    def preview(self) -> dict[str, Any]:
        """What the approval shows and stores: the decoded transaction and its hash."""
        return {"kind": KIND, "hash": self.signing_hash(), "transaction": self.decoded()}


@dataclass(frozen=True, slots=True)
class StoredTx:
    call_id: str
    team_id: str
    tool: str
    authorization_kind: str
    tx: EvmTransaction
    signing_hash: str
    state: str
    error_code: str | None
    raw_tx: str | None
    tx_hash: str | None
    receipt_status: int | None
    block_number: int | None


_COLUMNS = """call_id, team_id, tool, authorization_kind, tx, signing_hash, state, error_code,
              raw_tx, tx_hash, receipt_status, block_number"""


def _stored(r: asyncpg.Record) -> StoredTx:
    return StoredTx(
        call_id=str(r["call_id"]), team_id=r["team_id"], tool=r["tool"],
        authorization_kind=r["authorization_kind"], tx=EvmTransaction.from_decoded(r["tx"]),
        signing_hash=r["signing_hash"], state=r["state"], error_code=r["error_code"],
        raw_tx=r["raw_tx"], tx_hash=r["tx_hash"], receipt_status=r["receipt_status"],
        block_number=int(r["block_number"]) if r["block_number"] is not None else None,
    )


class TxStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def get(self, call_id: str) -> StoredTx | None:
        row = await self.pool.fetchrow(
            f"SELECT {_COLUMNS} FROM wallet_transactions WHERE call_id = $1", uuid.UUID(call_id))
        return _stored(row) if row else None

    async def prepared(self, *, call_id: str, team_id: str, agent_id: str, tool: str,
                       kind: str, tx: EvmTransaction) -> StoredTx:
        """Keep the prepared transaction; a call prepared twice keeps its first one."""
        await self.pool.execute(
            """INSERT INTO wallet_transactions (call_id, team_id, agent_id, tool, authorization_kind,
                                                from_address, chain_id, nonce, tx, signing_hash, state)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'prepared')
               ON CONFLICT (call_id) DO NOTHING""",
            uuid.UUID(call_id), team_id, agent_id, tool, kind, tx.from_address, tx.chain_id,
            tx.nonce, tx.decoded(), tx.signing_hash(),
        )
        stored = await self.get(call_id)
        assert stored is not None
        return stored

    async def claim(self, conn: asyncpg.Connection, call_id: str) -> bool:
        """prepared -> signing (or a crashed signer's signing, retaken under the sender lock)."""
        done = await conn.fetchval(
            """UPDATE wallet_transactions SET state = 'signing', updated_at = now()
               WHERE call_id = $1 AND state IN ('prepared', 'signing') RETURNING call_id""",
            uuid.UUID(call_id))
        return done is not None

    async def signed(self, conn: asyncpg.Connection, call_id: str, raw: str, tx_hash: str) -> bool:
        """signing -> signed, the raw transaction durable before it leaves. False when this
        sender's nonce is already signed for another transaction (a replay): nothing changes."""
        try:
            await conn.execute(
                """UPDATE wallet_transactions SET state = 'signed', raw_tx = $2, tx_hash = $3,
                                                  updated_at = now()
                   WHERE call_id = $1 AND state = 'signing'""",
                uuid.UUID(call_id), raw, tx_hash)
        except asyncpg.UniqueViolationError:
            return False
        return True

    async def mark(self, call_id: str, state: str, *, error_code: str | None = None,
                   receipt: dict[str, Any] | None = None,
                   conn: asyncpg.Connection | None = None) -> None:
        await (conn or self.pool).execute(
            """UPDATE wallet_transactions
               SET state = $2, error_code = COALESCE($3, error_code),
                   receipt_status = COALESCE($4, receipt_status),
                   block_number = COALESCE($5, block_number), updated_at = now()
               WHERE call_id = $1""",
            uuid.UUID(call_id), state, error_code,
            receipt["status"] if receipt else None, receipt["block_number"] if receipt else None)
