"""The wallet's chain for tests: the node and the wallet's keys (one funded key per test team),
a fresh recipient, and an agent granted the chain tools."""

from __future__ import annotations

import asyncio
import uuid

from eth_account import Account

from services.wallet.keys import WalletKeys
from tests.support.calls import bearer, grant
from tests.support.chain_node import ChainNode


class Chain:
    """The node, the wallet's keys (one funded key per test team) and the wallet service."""

    def __init__(self, node: ChainNode, keys: WalletKeys) -> None:
        self.node = node
        self.keys = keys
        self.key_hex: dict[str, str] = {}

    def team(self) -> str:
        """A new team with a funded wallet of its own (a fresh key: nonces start at 0)."""
        team = f"t_ch_{uuid.uuid4().hex[:8]}"
        account = Account.create()
        self.node.fund(account.address)
        self.key_hex[team] = account.key.hex()
        self.keys.add(team, account.key.hex())
        return team


def recipient() -> str:
    return Account.create().address


async def agent_of(client, token, team: str, *tools: str, agent: str = "payer") -> str:
    """An agent granted these tools, with a per-agent rate above category D's 5 a minute."""
    admin = token(agent="root", team="ops", role="admin")
    for tool in tools:
        await grant(client, token, team, f"tool.{tool}.invoke")
        r = await client.post("/v1/admin/overrides", headers=bearer(admin), json={
            "team_id": team, "agent_id": agent, "tool": tool, "rate_per_minute": 600})
        assert r.status == 201, await r.text()
    await asyncio.sleep(0.2)
    return token(agent=agent, team=team)
