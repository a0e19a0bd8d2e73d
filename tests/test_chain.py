"""chain.transfer / chain.call through the whole pipeline, against an in-process EVM (eth-tester on
py-evm) behind a local JSON-RPC server: the approval shows the exact transaction and binds to
its hash; only that one is signed, submitted once, and its receipt checked."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

import nats
import orjson
import pytest
from eth_account import Account

from wire.digest import args_digest
from services.wallet.keys import WalletKeys
from proxy.core.forward import CallMeta
from tests.support.bus_auth import signed_headers
from tests.support.calls import bearer, invoke
from tests.support.approvals import decide, resume
from tests.support.chain_wallet import agent_of, recipient

pytestmark = pytest.mark.timeout(120)


async def pending_approval(client, gov: str, approval_id: str) -> dict:
    r = await client.get("/v1/approvals", params={"state": "all"}, headers=bearer(gov))
    assert r.status == 200
    found = [a for a in (await r.json())["approvals"] if a["approval_id"] == approval_id]
    assert len(found) == 1
    return found[0]


async def wallet_row(db_pool, call_id: str):
    return await db_pool.fetchrow("SELECT * FROM wallet_transactions WHERE call_id = $1",
                                  uuid.UUID(call_id))


async def test_the_approval_shows_the_exact_transaction_and_only_it_is_signed(
        chain_client, chain, token, db_pool) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    to = recipient()
    sends = node.sends

    status, held = await invoke(client, payer, "chain.transfer", {"to": to.lower(), "value_wei": 12345})
    assert status == 202, held
    approval = await pending_approval(client, gov, held["approval_id"])
    preview = approval["preview"]
    sender = chain.keys.address(team)
    assert preview["kind"] == "evm_transaction"
    tx = preview["transaction"]
    assert tx["to"] == to and tx["value_wei"] == 12345 and tx["data"] == "0x"
    assert tx["from"] == sender and tx["chain_id"] == node.chain_id
    assert tx["nonce"] == node.nonce(sender) and tx["gas"] >= 21000 and tx["type"] == 2
    assert tx["max_fee_per_gas"] >= tx["max_priority_fee_per_gas"] > 0
    assert approval["binding"] == preview["hash"]
    row = await wallet_row(db_pool, held["call_id"])
    assert row["state"] == "prepared" and row["signing_hash"] == preview["hash"]
    assert node.sends == sends and node.balance(to) == 0  # held: nothing sent

    # Keys never leave the wallet: not in the approval, the held answer or the wallet's repr.
    key_hex = chain.key_hex[team].removeprefix("0x")
    assert key_hex not in orjson.dumps([approval, held]).decode()
    assert key_hex not in repr(chain.keys)

    assert (await decide(client, gov, held["approval_id"], "approve"))[0] == 200
    status, done = await resume(client, payer, held["call_id"])
    assert status == 200, done
    out = done["output"]
    assert out["status"] == "success" and out["from"] == sender and out["nonce"] == tx["nonce"]
    assert isinstance(out["block_number"], int)
    assert node.balance(to) == 12345 and node.sends == sends + 1
    assert node.nonce(sender) == tx["nonce"] + 1
    row = await wallet_row(db_pool, held["call_id"])
    assert (row["state"], row["receipt_status"], row["tx_hash"]) == ("mined", 1, out["tx_hash"])
    # Resumed again: the same answer, nothing sent again.
    assert await resume(client, payer, held["call_id"]) == (200, done)
    assert node.sends == sends + 1 and node.balance(to) == 12345


async def test_chain_call_checks_the_receipt_status(chain_client, chain, token, db_pool) -> None:
    """Two teams hold a call to a one-shot contract (both estimate fine); the first sets its
    slot, the second is mined and reverts: FAILED tx_reverted, from the receipt."""
    client, node = chain_client, chain.node
    contract = node.deploy()
    word = "0x" + "00" * 31 + "2a"
    held = []
    for team in (chain.team(), chain.team()):
        agent = await agent_of(client, token, team, "chain.call")
        status, body = await invoke(client, agent, "chain.call", {"to": contract, "data": word})
        assert status == 202, body
        gov = token(agent="gov", team=team, role="governance")
        assert (await decide(client, gov, body["approval_id"], "approve"))[0] == 200
        held.append((agent, body))
    status, first = await resume(client, held[0][0], held[0][1]["call_id"])
    assert (status, first["status"], first["output"]["status"]) == (200, "COMPLETED", "success")
    assert node.storage(contract) == 42
    status, second = await resume(client, held[1][0], held[1][1]["call_id"])
    assert (status, second["status"]) == (200, "FAILED"), second
    assert second["error"]["tool_code"] == "tx_reverted"
    row = await wallet_row(db_pool, held[1][1]["call_id"])
    assert (row["state"], row["receipt_status"]) == ("mined", 0)
    assert row["tx_hash"] in second["error"]["message"]


async def test_a_transaction_that_would_fail_is_never_held(chain_client, chain, token) -> None:
    client, node = chain_client, chain.node
    contract = node.deploy()
    team = chain.team()
    agent = await agent_of(client, token, team, "chain.call")
    status, body = await invoke(client, agent, "chain.call", {"to": contract, "data": "0x"})
    assert (status, body["status"], body["error"]["tool_code"]) == (200, "FAILED", "tx_would_fail")
    assert "approval_id" not in body


async def test_a_replayed_nonce_is_refused_before_anything_is_sent(chain_client, chain, token, db_pool) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    to = recipient()
    held = []
    for value in (100, 200):  # both prepared before either is sent: the same nonce
        status, body = await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": value})
        assert status == 202
        assert (await decide(client, gov, body["approval_id"], "approve"))[0] == 200
        held.append(body)
    nonces = {(await pending_approval(client, gov, h["approval_id"]))["preview"]["transaction"]["nonce"]
              for h in held}
    assert len(nonces) == 1
    status, first = await resume(client, payer, held[0]["call_id"])
    assert first["status"] == "COMPLETED", first
    sends = node.sends
    status, second = await resume(client, payer, held[1]["call_id"])
    assert (status, second["status"], second["error"]["tool_code"]) == (200, "FAILED", "nonce_replayed")
    assert node.sends == sends and node.balance(to) == 100  # the second was never sent
    row = await wallet_row(db_pool, held[1]["call_id"])
    assert (row["state"], row["error_code"], row["raw_tx"]) == ("refused", "nonce_replayed", None)


async def test_a_transaction_other_than_the_approved_one_is_refused(chain_client, chain, token, db_pool) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    to, thief = recipient(), recipient()
    sends = node.sends

    # Another value, another recipient on resume: refused by the proxy, nothing consumed.
    status, held = await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": 500})
    await decide(client, gov, held["approval_id"], "approve")
    for other in ({"to": to, "value_wei": 5_000_000}, {"to": thief, "value_wei": 500}):
        status, body = await resume(client, payer, held["call_id"], args=other)
        assert (status, body["error"]["code"]) == (400, "invalid_request")
    # The transaction kept for signing changed after the approval (another recipient):
    # the wallet refuses it, as it no longer hashes to what governance approved.
    await db_pool.execute(
        "UPDATE wallet_transactions SET tx = jsonb_set(tx, '{to}', to_jsonb($2::text)) WHERE call_id = $1",
        uuid.UUID(held["call_id"]), thief)
    status, body = await resume(client, payer, held["call_id"])
    assert (status, body["status"], body["error"]["tool_code"]) == (200, "FAILED", "tx_mismatch")
    assert node.sends == sends and node.balance(thief) == 0 and node.balance(to) == 0

    # Another value behind the same hash (the wallet's row tampered, the hash kept).
    status, held = await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": 600})
    await decide(client, gov, held["approval_id"], "approve")
    await db_pool.execute(
        """UPDATE wallet_transactions SET tx = jsonb_set(tx, '{value_wei}', '6000000'::jsonb)
           WHERE call_id = $1""", uuid.UUID(held["call_id"]))
    await db_pool.execute("UPDATE calls SET args = jsonb_set(args, '{value_wei}', '6000000'::jsonb) "
                          "WHERE call_id = $1", uuid.UUID(held["call_id"]))
    await db_pool.execute("UPDATE approvals SET args_hash = $2 WHERE call_id = $1",
                          uuid.UUID(held["call_id"]), args_digest({"to": to, "value_wei": 6_000_000})[0])
    status, body = await resume(client, payer, held["call_id"])
    assert (status, body["error"]["tool_code"]) == (200, "tx_mismatch"), body
    assert node.sends == sends and node.balance(to) == 0


async def test_the_wallet_signs_nothing_that_was_not_approved(chain, nats_url) -> None:
    """Straight onto the bus (past the proxy): no approval header, or a wrong binding, and the
    wallet refuses before reaching the chain."""
    team = chain.team()
    nc = await nats.connect(nats_url)
    sends = chain.node.sends
    try:
        payload = orjson.dumps({"args": {"to": recipient(), "value_wei": 1}})
        subject = "tools.chain.transfer.invoke"
        for extra, code in (({}, "tx_not_approved"),
                            ({"approval": "per_call", "approval_ref": "0x" + "ab" * 32}, "tx_not_prepared")):
            # Signed as the proxy would (the wallet's own check stands behind the signature).
            meta = CallMeta(call_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()), team_id=team,
                            agent_id="rogue", run_id=None, confidential=False, **extra)
            headers = signed_headers(meta, subject, payload, time.time() + 5)
            msg = await nc.request(subject, payload, timeout=5, headers=headers)
            reply = orjson.loads(msg.data)
            assert (reply["ok"], reply["error"]["code"]) == (False, code)
    finally:
        await nc.close()
    assert chain.node.sends == sends


async def test_a_standing_approval_covers_transfers_within_its_constraint(
        chain_client, chain, token, db_pool) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    to = recipient()
    expires = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    r = await client.post("/v1/admin/standing-approvals", headers=bearer(gov), json={
        "team_id": team, "tool": "chain.transfer", "expires_at": expires, "max_calls": 6,
        "args_schema": {"type": "object", "required": ["to", "value_wei"],
                        "properties": {"to": {"const": to}, "value_wei": {"maximum": 1000}}}})
    assert r.status == 201, await r.text()
    sid = (await r.json())["standing_approval_id"]
    await asyncio.sleep(0.2)

    # Four at once, from one sender: consecutive nonces, all mined (the sender lock).
    results = await asyncio.gather(*(invoke(client, payer, "chain.transfer", {"to": to, "value_wei": v})
                                     for v in (100, 200, 300, 400)))
    assert [s for s, _ in results] == [200] * 4, results
    assert sorted(b["output"]["nonce"] for _, b in results) == [0, 1, 2, 3]
    assert node.balance(to) == 1000
    for _, body in results:
        row = await wallet_row(db_pool, body["call_id"])
        assert (row["authorization_kind"], row["state"]) == ("standing", "mined")
    # Outside the constraint: held for a per-call approval.
    assert (await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": 5000}))[0] == 202
    assert (await invoke(client, payer, "chain.transfer", {"to": recipient(), "value_wei": 10}))[0] == 202
    r = await client.get("/v1/admin/standing-approvals", headers=bearer(gov))
    mine = [a for a in (await r.json())["standing_approvals"] if a["standing_approval_id"] == sid]
    assert mine[0]["used_calls"] == 4


async def test_a_failed_submission_leaves_no_half_state(chain_client, chain, token, db_pool, nats_url) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    gov = token(agent="gov", team=team, role="governance")
    to = recipient()

    async def approved(value: int) -> dict:
        status, held = await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": value})
        assert status == 202, held
        await decide(client, gov, held["approval_id"], "approve")
        return held

    # The node refuses it: failed, nothing sent, the nonce free for the next one.
    held = await approved(1)
    node.refuse_next_send = True
    sends = node.sends
    status, body = await resume(client, payer, held["call_id"])
    assert (body["status"], body["error"]["tool_code"]) == ("FAILED", "tx_rejected"), body
    assert node.sends == sends and node.balance(to) == 0
    assert (await wallet_row(db_pool, held["call_id"]))["state"] == "failed"

    # Lost on its way to the node: kept signed, reported as unknown; the same call retried
    # (as a replica would, over the bus) re-sends exactly those bytes, once.
    held = await approved(2)
    node.lose_next_send = True
    status, body = await resume(client, payer, held["call_id"])
    assert (body["status"], body["error"]["tool_code"]) == ("FAILED", "tx_submission_unknown"), body
    row = await wallet_row(db_pool, held["call_id"])
    assert row["state"] == "signed" and row["tx_hash"] in body["error"]["message"]
    assert node.balance(to) == 0
    nc = await nats.connect(nats_url)
    try:
        meta = CallMeta(call_id=held["call_id"], decision_id=str(uuid.uuid4()), team_id=team,
                        agent_id="payer", run_id=None, confidential=False, approval="per_call",
                        approval_ref=row["signing_hash"])
        payload = orjson.dumps({"args": {"to": to, "value_wei": 2}})
        replies = []
        for _ in range(2):  # each send signed anew, as each replica's would be
            subject = "tools.chain.transfer.invoke"
            headers = signed_headers(meta, subject, payload, time.time() + 10)
            msg = await nc.request(subject, payload, timeout=10, headers=headers)
            replies.append(orjson.loads(msg.data))
    finally:
        await nc.close()
    assert [r["output"]["status"] for r in replies] == ["success", "success"], replies
    assert {r["output"]["tx_hash"] for r in replies} == {row["tx_hash"]}
    assert node.balance(to) == 2  # submitted once

    # Applied by the node, its answer lost: the receipt says it happened.
    held = await approved(3)
    node.drop_next_send_reply = True
    sends = node.sends
    status, body = await resume(client, payer, held["call_id"])
    assert (body["status"], body["output"]["status"]) == ("COMPLETED", "success"), body
    assert node.sends == sends + 1 and node.balance(to) == 5


async def test_refusals_before_anything_is_held(chain_client, chain, token) -> None:
    client, node = chain_client, chain.node
    team = chain.team()
    payer = await agent_of(client, token, team, "chain.transfer")
    to = recipient()
    status, body = await invoke(client, payer, "chain.transfer",
                                {"to": to, "value_wei": 1, "chain_id": node.chain_id + 1})
    assert (status, body["error"].get("tool_code")) == (200, "wrong_chain"), body
    mixed = to[:2] + "".join(c.upper() if c.islower() else c.lower() for c in to[2:])
    if mixed != to and mixed[2:] != mixed[2:].lower() and mixed[2:] != mixed[2:].upper():
        status, body = await invoke(client, payer, "chain.transfer", {"to": mixed, "value_wei": 1})
        assert (status, body["error"].get("tool_code")) == (200, "invalid_address"), body
    walletless = f"t_nowallet_{uuid.uuid4().hex[:6]}"
    agent = await agent_of(client, token, walletless, "chain.transfer")
    status, body = await invoke(client, agent, "chain.transfer", {"to": to, "value_wei": 1})
    assert (status, body["error"].get("tool_code")) == (200, "no_wallet"), body
    status, body = await invoke(client, payer, "chain.transfer", {"to": to, "value_wei": 1 << 63})
    assert (status, body["error"]["code"]) == (400, "invalid_request")  # beyond 64 bits: refused at the door
    for bad in ({"to": to, "value_wei": -1}, {"to": "0x12", "value_wei": 1},
                {"to": to, "value_wei": 1, "gas": 1}, {"to": to, "value_wei": "1"}):
        status, body = await invoke(client, payer, "chain.transfer", bad)
        assert (status, body["error"]["code"]) == (400, "invalid_args"), bad
    status, body = await invoke(client, payer, "chain.call", {"to": to, "data": "0x123"})
    assert (status, body["error"]["code"]) == (400, "invalid_args")


def test_approval_preview_and_a_prepare_handler_go_together() -> None:
    from services.sdk import Service
    from services.sdk.errors import ManifestError
    from services.sdk.service import ToolDef, make_manifest
    from services.wallet.manifests import TRANSFER

    async def handler(args, ctx):  # pragma: no cover - never called
        return {}

    with pytest.raises(ManifestError, match="approval_preview"):
        Service(name="x", tools=[ToolDef(manifest=TRANSFER, handler=handler)])
    plain = make_manifest({"tool_id": "x.y", "category": "D", "action": "write", "description": "d",
                           "input_schema": {"type": "object"}})
    with pytest.raises(ManifestError, match="approval_preview"):
        Service(name="x", tools=[ToolDef(manifest=plain, handler=handler, prepare=handler)])


def test_the_keys_file_is_checked_and_keys_never_shown(tmp_path) -> None:
    from services.wallet.keys import KeyFileError

    secret = Account.create().key.hex()
    path = tmp_path / "keys.json"
    path.write_text(orjson.dumps({"team-1": secret}).decode())
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        WalletKeys.from_file(path)
    path.chmod(0o600)
    keys = WalletKeys.from_file(path)
    assert keys.address("team-1") == Account.from_key(secret).address
    assert keys.address("team-2") is None
    assert secret.removeprefix("0x") not in repr(keys)
    for bad in ({"team-1": "0x1234"}, {"bad team": secret}, [secret]):
        path.write_text(orjson.dumps(bad).decode())
        with pytest.raises(KeyFileError) as caught:
            WalletKeys.from_file(path)
        assert secret.removeprefix("0x") not in str(caught.value)
