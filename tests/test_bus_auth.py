"""The bus is no open door: against the real NATS server, a client without credentials is
refused, each process's identity is confined to its own subjects, and a service acts only on
a call context the proxy signed, once, in its time (issue 31)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import nats
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.errors import Error as NatsError

from infra.embedded import nats_auth
from infra.nats_auth import NatsAuth, redact_url
from proxy.core.forward import CallMeta
from proxy.core.idempotency import BUCKET as IDEMPOTENCY_BUCKET
from proxy.core.limits.nats_store import QUOTA_BUCKET, RATE_BUCKET
from proxy.core.run_budget import BUCKET as RUNS_BUCKET
from proxy.records.dead_letters import PREFIX as DEAD_LETTER_PREFIX
from proxy.records.entry import SUBJECT_PREFIX as JOURNAL_PREFIX
from services.agents.invocations import BUCKET as INVOCATIONS_BUCKET
from tests.support.bus_auth import TEST_NATS_PASSWORDS, bare_url, role_auth, signed_headers
from wire import call_context as cc
from wire import protocol as p

pytestmark = pytest.mark.timeout(60)


async def _as(nats_url: str, role: str, errors: list[Exception] | None = None) -> Any:
    async def on_error(exc: Exception) -> None:
        if errors is not None:
            errors.append(exc)

    return await nats.connect(bare_url(nats_url), error_cb=on_error, allow_reconnect=False,
                              **role_auth(role).options())


def _needs_auth(nats_url: str) -> None:
    if "@" not in nats_url:
        pytest.skip("the session's NATS is not the suite's own (TOOLPROXY_TEST_NATS_URL): its users are unknown")


def test_the_permissions_name_the_products_own_subjects_and_buckets() -> None:
    from services.builtin import BUILTIN_TOOLS, LLM_TOOLS
    from services.served import SERVED_TOOLS
    from services.wallet.manifests import TOOL_IDS as WALLET_TOOLS

    assert set(SERVED_TOOLS) == {*BUILTIN_TOOLS, *LLM_TOOLS, *WALLET_TOOLS}
    assert set(nats_auth.PROXY_BUCKETS) == {RATE_BUCKET, QUOTA_BUCKET, IDEMPOTENCY_BUCKET, RUNS_BUCKET}
    assert nats_auth.SERVICES_BUCKETS == (INVOCATIONS_BUCKET,)
    perms = nats_auth.roles(SERVED_TOOLS)
    assert JOURNAL_PREFIX.startswith("toolproxy.") and DEAD_LETTER_PREFIX.startswith("toolproxy.")
    assert {p.ANNOUNCE_SUBJECT, p.GOODBYE_SUBJECT} <= set(perms["proxy"]["subscribe"]["allow"])
    for role in ("services", "plugins"):
        pub, sub = perms[role]["publish"]["allow"], perms[role]["subscribe"]["allow"]
        assert {p.ANNOUNCE_SUBJECT, p.GOODBYE_SUBJECT} <= set(pub) and p.DISCOVER_SUBJECT in sub
        assert "tools.>" not in pub and not any(s.startswith("toolproxy.journal") for s in pub)
    assert "tools.>" not in perms["services"]["subscribe"]["allow"]
    assert "tools.file.read.*" in perms["plugins"]["subscribe"]["deny"]


async def test_a_client_without_credentials_cannot_connect(nats_url: str) -> None:
    _needs_auth(nats_url)
    with pytest.raises(NatsError, match="Authorization Violation"):
        await nats.connect(bare_url(nats_url), allow_reconnect=False, connect_timeout=2,
                           max_reconnect_attempts=0)
    with pytest.raises(NatsError, match="Authorization Violation"):
        await nats.connect(bare_url(nats_url), allow_reconnect=False, connect_timeout=2,
                           max_reconnect_attempts=0, user="services", password="guessed")


@pytest.mark.parametrize("role", ["services", "plugins", "agents"])
async def test_only_the_proxy_invokes_tools_writes_limits_and_journals(nats_url: str, role: str) -> None:
    """What the role publishes where it may not is refused by the server and reaches nobody:
    an admin listening on those subjects sees only the proxy's sentinel after them."""
    _needs_auth(nats_url)
    errors: list[Exception] = []
    spy = await nats.connect(nats_url)
    seen: list[str] = []

    async def record(msg: Any) -> None:
        seen.append(msg.subject)

    forbidden = ["tools.file.read.invoke", "tools.file.read.cancel", f"$KV.{RATE_BUCKET}.team-1",
                 f"$KV.{QUOTA_BUCKET}.team-1", f"$KV.{IDEMPOTENCY_BUCKET}.k", f"$KV.{RUNS_BUCKET}.r",
                 f"{JOURNAL_PREFIX}.misc", f"{DEAD_LETTER_PREFIX}.x", "$JS.API.STREAM.DELETE.TOOLPROXY_JOURNAL"]
    for subject in forbidden:
        await spy.subscribe(subject, cb=record)
    await spy.subscribe("toolproxy.sentinel", cb=record)
    await spy.flush()
    nc = await _as(nats_url, role, errors)
    try:
        for subject in forbidden:
            await nc.publish(subject, b"forged", headers={p.H_TEAM_ID: "team-1"})
        await nc.flush()
        proxy = await _as(nats_url, "proxy")
        await proxy.publish("toolproxy.sentinel", b"")
        await proxy.flush()
        await proxy.close()
        for _ in range(100):
            if "toolproxy.sentinel" in seen and len(errors) >= len(forbidden):
                break
            await asyncio.sleep(0.02)
    finally:
        await nc.close()
        await spy.close()
    assert seen == ["toolproxy.sentinel"]
    violations = {str(e) for e in errors}
    for subject in forbidden:
        assert any("permissions violation for publish" in v and subject.lower() in v.lower()
                   for v in violations), (subject, violations)


async def test_a_service_takes_only_its_own_tools_calls_and_a_plugin_none_of_theirs(nats_url: str) -> None:
    """The services' user may subscribe to the built-in tools' subjects only, the plugin
    host's to every other tool's: what the proxy publishes reaches only the allowed one."""
    _needs_auth(nats_url)
    proxy = await _as(nats_url, "proxy")
    try:
        for role, subject, allowed in (("services", "tools.someplugin.invoke", False),
                                       ("plugins", "tools.file.read.invoke", False),
                                       ("services", "tools.file.read.invoke", True),
                                       ("plugins", "tools.someplugin.invoke", True)):
            errors: list[Exception] = []
            got = asyncio.get_running_loop().create_future()

            async def on_msg(msg: Any, got: asyncio.Future[bytes] = got) -> None:
                if not got.done():
                    got.set_result(msg.data)

            nc = await _as(nats_url, role, errors)
            try:
                await nc.subscribe(subject, queue="svc.x", cb=on_msg)
                await nc.flush()
                await proxy.publish(subject, b"call")
                await proxy.flush()
                if allowed:
                    # Published again while nothing arrived (a full suite once saw the first
                    # copy not delivered in 5 s): an allowed subscription gets one of them.
                    for _ in range(5):
                        done, _ = await asyncio.wait({got}, timeout=1.0)
                        if done:
                            break
                        await proxy.publish(subject, b"call")
                        await proxy.flush()
                    assert got.done() and got.result() == b"call", (role, subject, errors)
                else:
                    await nc.flush()  # the server's -ERR came before this round trip's PONG
                    for _ in range(50):
                        if errors:
                            break
                        await asyncio.sleep(0.01)
                    assert any("permissions violation for subscription" in str(e) for e in errors), (role, subject)
                    assert not got.done(), (role, subject)
            finally:
                await nc.close()
    finally:
        await proxy.close()


async def test_no_process_reads_another_ones_replies(nats_url: str) -> None:
    _needs_auth(nats_url)
    for role, other in (("plugins", "proxy"), ("services", "proxy"), ("proxy", "services")):
        errors: list[Exception] = []
        nc = await _as(nats_url, role, errors)
        try:
            await nc.subscribe(f"_INBOX.{other}.>")
            await nc.flush()
            for _ in range(50):
                if errors:
                    break
                await asyncio.sleep(0.02)
        finally:
            await nc.close()
        assert any("permissions violation for subscription" in str(e) for e in errors), (role, errors)


# --- the signed call context ----------------------------------------------------------------

WRITE = "tools.file.write.invoke"
READ = "tools.file.read.invoke"


def _meta(team: str, **extra: Any) -> CallMeta:
    return CallMeta(call_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()), team_id=team,
                    agent_id="agent-1", run_id=None, confidential=False, **extra)


async def _files(db_pool: Any, team: str) -> list[str]:
    return [r["path"] for r in await db_pool.fetch("SELECT path FROM files WHERE team_id = $1", team)]


async def _ask(nc: Any, subject: str, payload: bytes, headers: dict[str, str]) -> dict[str, Any]:
    msg = await nc.request(subject, payload, timeout=5, headers=headers)
    return orjson.loads(msg.data)


async def test_the_issues_attack_reads_no_teams_file(builtin, nats_url, db_pool) -> None:  # type: ignore[no-untyped-def]
    """A file of team-1's, written through a signed call; then the attack of the issue: a bare
    client cannot even connect, and a client that can reach the subject (the operator's
    admin here) with the team header alone, or a context of its own key, reads nothing."""
    _needs_auth(nats_url)
    team = f"team-{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(nats_url)
    try:
        payload = orjson.dumps({"args": {"path": "secret.txt", "content": "team secret"}})
        wrote = await _ask(nc, WRITE, payload, signed_headers(_meta(team), WRITE, payload, time.time() + 5))
        assert wrote["ok"], wrote
        with pytest.raises(NatsError):
            await nats.connect(bare_url(nats_url), allow_reconnect=False, connect_timeout=2,
                               max_reconnect_attempts=0)
        read = orjson.dumps({"args": {"path": "secret.txt"}})
        bare = {p.H_TEAM_ID: team, p.H_CALL_ID: "c1", p.H_AGENT_ID: "a",
                p.H_DEADLINE: str(int((time.time() + 5) * 1000))}
        reply = await _ask(nc, READ, read, bare)
        assert (reply["ok"], reply["error"]["code"]) == (False, cc.MISSING)
        forged = signed_headers(_meta(team), READ, read, time.time() + 5, key=Ed25519PrivateKey.generate())
        reply = await _ask(nc, READ, read, forged)
        assert (reply["ok"], reply["error"]["code"]) == (False, cc.INVALID)
        assert "team secret" not in orjson.dumps(reply).decode()
    finally:
        await nc.close()


async def test_refused_contexts_run_nothing(builtin, nats_url, db_pool) -> None:  # type: ignore[no-untyped-def]
    """Forged, tampered, moved, replayed, expired or missing: each refused with its code, and
    no file is written."""
    _needs_auth(nats_url)
    team = f"team-{uuid.uuid4().hex[:8]}"
    payload = orjson.dumps({"args": {"path": "a.txt", "content": "x"}})
    other = orjson.dumps({"args": {"path": "b.txt", "content": "y"}})
    soon = time.time() + 5
    good = signed_headers(_meta(team), WRITE, payload, soon)
    tampered = dict(good, **{cc.H_CALL_CONTEXT: good[cc.H_CALL_CONTEXT][:-4] + "AAAA"})
    cases = [
        ("missing", payload, {k: v for k, v in good.items() if k != cc.H_CALL_CONTEXT}, cc.MISSING),
        ("forged", payload, signed_headers(_meta(team), WRITE, payload, soon,
                                           key=Ed25519PrivateKey.generate()), cc.INVALID),
        ("tampered signature", payload, tampered, cc.INVALID),
        ("other arguments", other, good, cc.INVALID),
        ("another tool's context", payload, signed_headers(_meta(team), READ, payload, soon), cc.INVALID),
        ("expired", payload, signed_headers(_meta(team), WRITE, payload, time.time() - 60), cc.EXPIRED),
        ("garbage", payload, dict(good, **{cc.H_CALL_CONTEXT: "x.y"}), cc.INVALID),
    ]
    nc = await nats.connect(nats_url)
    try:
        for note, body, headers, code in cases:
            reply = await _ask(nc, WRITE, body, headers)
            assert (reply["ok"], reply["error"]["code"]) == (False, code), note
        assert await _files(db_pool, team) == []
        # The genuine context runs once; the same message again is a replay.
        assert (await _ask(nc, WRITE, payload, good))["ok"]
        replay = await _ask(nc, WRITE, payload, good)
        assert (replay["ok"], replay["error"]["code"]) == (False, cc.REPLAYED)
    finally:
        await nc.close()
    assert await _files(db_pool, team) == ["a.txt"]


async def test_the_service_acts_on_the_signed_team_not_the_header(builtin, nats_url, db_pool) -> None:  # type: ignore[no-untyped-def]
    _needs_auth(nats_url)
    mine, theirs = (f"team-{uuid.uuid4().hex[:8]}" for _ in range(2))
    payload = orjson.dumps({"args": {"path": "c.txt", "content": "z"}})
    headers = signed_headers(_meta(mine), WRITE, payload, time.time() + 5)
    headers[p.H_TEAM_ID] = theirs  # a header rewritten on the way: logs only
    nc = await nats.connect(nats_url)
    try:
        assert (await _ask(nc, WRITE, payload, headers))["ok"]
    finally:
        await nc.close()
    assert (await _files(db_pool, mine), await _files(db_pool, theirs)) == (["c.txt"], [])


# --- no secret in a log line ----------------------------------------------------------------

def test_a_password_in_the_nats_url_is_never_printed() -> None:
    from proxy.config import Settings

    url = "nats://proxy:s3cr3t-pw@nats-1:4222,nats://proxy:s3cr3t-pw@nats-2:4222"
    assert redact_url(url) == "nats://proxy:***@nats-1:4222,nats://proxy:***@nats-2:4222"
    assert redact_url("nats://tok3n@host:4222") == "nats://***@host:4222"
    redacted = Settings(nats_url=url, nats_password="pw-2", call_context_key="k").redacted()
    assert "s3cr3t" not in orjson.dumps(redacted).decode()
    assert (redacted["nats_password"], redacted["call_context_key"]) == ("***", "***")
    assert "pw-2" not in repr(NatsAuth("u", "pw-2"))
    # A user given in the URL gets its own inbox too (the server allows it no other).
    assert NatsAuth().options("nats://services:pw@h:4222")["inbox_prefix"] == "_INBOX.services"
    assert "inbox_prefix" not in NatsAuth().options("nats://h:4222")


async def test_a_services_process_logs_no_password(nats_url, database_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`toolproxy services`, its credentials in its URL: connected (its metrics say so), and
    its log says where and as whom without the password."""
    _needs_auth(nats_url)
    import os
    import sys

    import aiohttp

    from infra.embedded.child import Child
    from infra.embedded.ports import free_port
    from tests.support.bus_auth import TEST_CALL_PUBLIC_TEXT

    password = TEST_NATS_PASSWORDS["services"]
    url = bare_url(nats_url).replace("nats://", f"nats://services:{password}@", 1)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    env.update(TOOLPROXY_NATS_URL=url, TOOLPROXY_DATABASE_URL=database_url,
               TOOLPROXY_DATA_DIR=str(tmp_path), TOOLPROXY_METRICS_PORT=str(port),
               TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS=TEST_CALL_PUBLIC_TEXT, TOOLPROXY_LOG_LEVEL="info",
               TOOLPROXY_SECRETS_KEY="A" * 43 + "=")
    child = Child("services", [sys.executable, "-m", "cli.main", "services"],
                  log_path=tmp_path / "services.log", env=env)
    child.start()
    try:
        connected = False
        async with aiohttp.ClientSession() as s:
            for _ in range(300):
                assert child.running(), child.log_tail()
                try:
                    async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                        if 'toolproxy_process_nats_connected{process="services"} 1.0' in await r.text():
                            connected = True
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        assert connected, child.log_tail()
    finally:
        child.stop()
    log = (tmp_path / "services.log").read_text()
    assert password not in log
    assert "services:***@" in log


async def test_a_proxy_whose_key_the_services_do_not_trust_runs_nothing(
        aiohttp_client, settings, builtin, db_pool, token) -> None:  # type: ignore[no-untyped-def]
    """A deployment fault (the services hold another public key): 503 tool_unavailable, the
    refusal's code named, and the file not written."""
    from pydantic import SecretStr

    from infra.call_keys import encode_private
    from proxy.web import keys as appkeys
    from proxy.web.app import create_app
    from tests.support.calls import grant, invoke

    other = SecretStr(encode_private(Ed25519PrivateKey.generate()))
    app = create_app(settings.model_copy(update={"call_context_key": other}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["file.write"], timeout=10)
    team = f"team-{uuid.uuid4().hex[:8]}"
    await grant(client, token, team, "tool.file.write.invoke")
    status, body = await invoke(client, token(team=team), "file.write", {"path": "w.txt", "content": "x"})
    assert (status, body["error"]["code"]) == (503, "tool_unavailable"), body
    assert cc.INVALID in body["error"]["message"]
    assert await _files(db_pool, team) == []
