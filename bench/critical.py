"""Category D benchmark (run by hand: python bench/critical.py).

1. p50/p90 of each critical tool through the proxy with a standing approval (no per-call
   approval): the seed's envelope with `team_id` and `agent_run_id`, one client, sequential.
   The chain tools reach a local JSON-RPC node (tests.support.chain_node: eth-tester on py-evm, in
   its own process), which mines a block per transaction.
2. The time from a governance approval to the resumed call's completion: the agent resuming
   at once when the approval returns, and the Python client's wait_for_approval (polling).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import AGENT, TEAM, bench_stack, prepare, remove  # noqa: E402
from client.native import AsyncToolproxy  # noqa: E402
from proxy.config import Settings  # noqa: E402
from infra.db import create_pool  # noqa: E402
from infra.embedded.child import Child  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from tests.support.chain_node import FUNDED_KEYS  # noqa: E402
from tests.support.infra import scratch_dir  # noqa: E402

OPERATOR = "bench-operator"
RECIPIENT = "0x000000000000000000000000000000000000bEEF"
CONTRACT_CALL = "0x" + "00" * 31 + "01"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def start_node(root: Path) -> tuple[Child, str]:
    port = free_port()
    node = Child("chain-node", [sys.executable, "-m", "tests.support.chain_node", "--port", str(port)],
                 log_path=root / "chain-node.log",
                 env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    node.start()
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        for _ in range(300):
            try:
                async with s.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}) as r:
                    if r.status == 200:
                        return node, url
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"chain node not ready: {node.log_tail()}")


async def seed(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=2)
    try:
        for meter_id, kind in (("bench-em", "energy"), ("bench-wm", "water")):
            await pool.execute("""INSERT INTO platform_meters (meter_id, platform, team_id)
                                  VALUES ($1, $2, $3) ON CONFLICT DO NOTHING""", meter_id, kind, TEAM)
            await pool.execute(
                """INSERT INTO platform_readings (meter_id, at, value)
                   SELECT $1, date_trunc('hour', now()) - make_interval(hours => i), 1 + i % 7
                   FROM generate_series(0, 48) AS i ON CONFLICT DO NOTHING""", meter_id)
        await pool.execute("""INSERT INTO platform_valves (valve_id, team_id) VALUES ('bench-wv', $1)
                              ON CONFLICT DO NOTHING""", TEAM)
        await pool.execute("UPDATE greenfood_products SET stock = 1000000 WHERE product_id = 'apple'")
    finally:
        await pool.close()


async def deploy_contract(url: str) -> str:
    """A contract storing its calldata's first word, deployed from an eth-tester account."""
    from tests.support.chain_node import STORE_INIT

    async with aiohttp.ClientSession() as s:
        async def rpc(method: str, params: list) -> object:
            async with s.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) as r:
                return (await r.json())["result"]

        from eth_account import Account

        acct = Account.from_key(FUNDED_KEYS[9])
        nonce = int(str(await rpc("eth_getTransactionCount", [acct.address, "pending"])), 16)
        chain_id = int(str(await rpc("eth_chainId", [])), 16)
        signed = acct.sign_transaction({"type": 2, "chainId": chain_id, "nonce": nonce, "gas": 200_000,
                                        "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9,
                                        "data": bytes.fromhex(STORE_INIT), "value": 0})
        tx_hash = await rpc("eth_sendRawTransaction", ["0x" + signed.raw_transaction.hex()])
        receipt = await rpc("eth_getTransactionReceipt", [tx_hash])
        return str(receipt["contractAddress"])  # type: ignore[index]


async def node_alone(url: str, n: int) -> tuple[float, float]:
    """The same transfer straight to the node (nonce, sign, send, receipt): the chain's share."""
    from eth_account import Account

    from services.wallet.chain import ChainClient

    chain = ChainClient(url)
    acct = Account.from_key(FUNDED_KEYS[8])
    chain_id = await chain.chain_id()
    lat = []
    try:
        for i in range(n + 5):
            t = time.perf_counter()
            nonce = await chain.pending_nonce(acct.address)
            max_fee, tip = await chain.fees()
            signed = acct.sign_transaction({"type": 2, "chainId": chain_id, "nonce": nonce, "to": RECIPIENT,
                                            "value": 1, "data": b"", "gas": 25_200, "maxFeePerGas": max_fee,
                                            "maxPriorityFeePerGas": tip})
            tx_hash = await chain.send_raw(signed.raw_transaction)
            assert (await chain.wait_receipt(tx_hash, time.time() + 10))["status"] == 1  # type: ignore[index]
            if i >= 5:
                lat.append((time.perf_counter() - t) * 1000)
    finally:
        await chain.close()
    return pct(lat, .5), pct(lat, .9)


async def governance(url: str, settings: Settings, tools: dict[str, str]) -> None:
    """Standing approvals for the bench agent (and the operator's valve), by a governance token."""
    gov = mint(settings, agent_id="bench-gov", team_id=TEAM, role="governance", ttl_s=3600)
    admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
    expires = (datetime.now(timezone.utc) + timedelta(hours=2)).isoformat()
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/v1/admin/overrides", headers={"Authorization": f"Bearer {admin}"}, json={
                "team_id": TEAM, "agent_id": OPERATOR, "tool": "water.valve.set",
                "rate_per_minute": 1_000_000}) as r:
            assert r.status == 201, await r.text()
        for tool, who in tools.items():
            async with s.post(f"{url}/v1/admin/standing-approvals", headers={"Authorization": f"Bearer {gov}"},
                              json={"team_id": TEAM, "agent_id": who, "tool": tool, "expires_at": expires,
                                    "max_calls": 1_000_000, "reason": "benchmark"}) as r:
                assert r.status == 201, await r.text()
    await asyncio.sleep(0.5)


async def p50_of(url: str, token: str, tool: str, make_args, n: int) -> tuple[float, float, str]:
    headers = {"Authorization": f"Bearer {token}"}
    lat: list[float] = []
    async with aiohttp.ClientSession(headers=headers) as s:
        for i in range(n + 5):
            body = {"tool": tool, "args": make_args(i),
                    "context": {"team_id": TEAM, "agent_run_id": "ar_bench"}}
            t = time.perf_counter()
            async with s.post(f"{url}/v1/tools/invoke", json=body) as r:
                answer = await r.json()
            if r.status != 200 or answer.get("status") != "COMPLETED":
                return 0.0, 0.0, f"{r.status} {answer.get('status')} {answer.get('error')}"
            if i >= 5:  # warm-up excluded
                lat.append((time.perf_counter() - t) * 1000)
    return pct(lat, .5), pct(lat, .9), ""


async def approval_to_completion(url: str, settings: Settings, tool: str, args, n: int,
                                 client_polling: bool) -> list[float]:
    """An agent without a standing approval: held; governance approves; time until done."""
    agent = mint(settings, agent_id="bench-waiter", team_id=TEAM, ttl_s=3600)
    gov = mint(settings, agent_id="bench-gov", team_id=TEAM, role="governance", ttl_s=3600)
    admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
    out = []
    async with aiohttp.ClientSession() as s, AsyncToolproxy(url, agent) as tp:
        async with s.post(f"{url}/v1/admin/overrides", headers={"Authorization": f"Bearer {admin}"}, json={
                "team_id": TEAM, "agent_id": "bench-waiter", "tool": tool, "rate_per_minute": 1_000_000}) as r:
            assert r.status in (200, 201), await r.text()
        await asyncio.sleep(0.3)
        for i in range(n):
            async with s.post(f"{url}/v1/tools/invoke", headers={"Authorization": f"Bearer {agent}"},
                              json={"tool": tool, "args": args(i), "context": {"team_id": TEAM}}) as r:
                held = await r.json()
                assert r.status == 202, held
            waiter = (asyncio.create_task(tp.wait_for_approval(held["call_id"], poll_s=1.0))
                      if client_polling else None)
            await asyncio.sleep(0.05)
            t = time.perf_counter()
            async with s.post(f"{url}/v1/approvals/{held['approval_id']}/decision",
                              headers={"Authorization": f"Bearer {gov}"}, json={"decision": "approve"}) as r:
                assert r.status == 200, await r.text()
            if waiter is not None:
                result = await waiter
                assert result.body["status"] == "COMPLETED"  # (else the client raises)
            else:
                async with s.post(f"{url}/v1/calls/{held['call_id']}/resume",
                                  headers={"Authorization": f"Bearer {agent}"}) as r:
                    done = await r.json()
                    assert done["status"] == "COMPLETED", done
            out.append((time.perf_counter() - t) * 1000)
    return out


async def main(n: int, waits: int) -> None:
    root = scratch_dir("toolproxy-bench-chain-")
    node, node_url = await start_node(root)
    keys = root / "wallet-keys.json"
    fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({TEAM: FUNDED_KEYS[0]}, f)
    stack = bench_stack(min(2, os.cpu_count() or 1), TOOLPROXY_CHAIN_RPC_URL=node_url,
                        TOOLPROXY_WALLET_KEYS_FILE=str(keys))
    results: list[str] = []
    try:
        await stack.start()
        settings = Settings(data_dir=stack.data_dir)
        tools = {"energy.meter.read": AGENT, "water.usage.read": AGENT, "greenfood.order": AGENT,
                 "chain.transfer": AGENT, "chain.call": AGENT, "water.valve.set": OPERATOR}
        headers = await prepare(stack, tuple(tools))
        agent_token = headers["Authorization"].removeprefix("Bearer ")
        operator = mint(settings, agent_id=OPERATOR, team_id=TEAM, role="admin", ttl_s=3600)
        await seed(stack.database_url)
        contract = await deploy_contract(node_url)
        await governance(stack.url, settings, tools)
        # New arguments on every call (a time range that moves, a quantity that changes): no
        # cache anywhere answers a repeat.
        def since(i: int) -> str:
            return (datetime.now(timezone.utc) - timedelta(minutes=1 + i)).isoformat()

        cases = [
            ("energy.meter.read", agent_token, lambda i: {"meter_id": "bench-em", "from": since(i)}),
            ("energy.meter.read (24 h range)", agent_token, lambda i: {
                "meter_id": "bench-em", "from": (datetime.now(timezone.utc) - timedelta(hours=24)).isoformat()}),
            ("water.usage.read", agent_token, lambda i: {"meter_id": "bench-wm", "from": since(i)}),
            ("water.valve.set (operator)", operator, lambda i: {"valve_id": "bench-wv", "open": i % 2 == 0}),
            ("greenfood.order create_order", agent_token, lambda i: {"op": "create_order", "product_id": "apple", "qty": 1 + i % 3}),
            ("chain.transfer", agent_token, lambda i: {"to": RECIPIENT, "value_wei": 1000 + i}),
            ("chain.call", agent_token, lambda i: {"to": contract, "data": CONTRACT_CALL}),
        ]
        for label, tok, args in cases:
            tool = label.split(" ")[0]
            p50, p90, problem = await p50_of(stack.url, tok, tool, args, n)
            results.append(f"  {label:<34} p50 {p50:7.2f} ms   p90 {p90:7.2f} ms" if not problem
                           else f"  {label:<34} failed: {problem}")
        p50, p90 = await node_alone(node_url, n)
        results.append(f"  {'(a transfer straight to the node)':<34} p50 {p50:7.2f} ms   p90 {p90:7.2f} ms")
        waits_out = []
        for tool, args in (("energy.meter.read", lambda i: {"meter_id": "bench-em", "from": since(i)}),
                           ("chain.transfer", lambda i: {"to": RECIPIENT, "value_wei": 7 + i})):
            lat = await approval_to_completion(stack.url, settings, tool, args, waits, client_polling=False)
            waits_out.append(f"  {tool:<18} resumed at once     p50 {pct(lat, .5):7.2f} ms   max {max(lat):7.2f} ms")
            lat = await approval_to_completion(stack.url, settings, tool, args, max(3, waits // 4),
                                               client_polling=True)
            waits_out.append(f"  {tool:<18} client polling 1 s  p50 {pct(lat, .5):7.2f} ms   max {max(lat):7.2f} ms")
    finally:
        remove(stack)
        node.stop()
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"loopback; proxy {stack.workers} workers, services, Postgres, NATS and the chain node on one box\n")
    print(f"each tool through the proxy with a standing approval ({n} sequential calls, one client):")
    print("\n".join(results))
    print(f"\nfrom a governance approval to the resumed call's completion ({waits} calls each):")
    print("\n".join(waits_out))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--waits", type=int, default=20)
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a.calls, a.waits))
