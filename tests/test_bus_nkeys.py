"""An NKey user on the bus: TOOLPROXY_NATS_CREDS naming a seed file signs the server's
challenge (nats-py with the `nkeys` package, a dependency), its replies come to the inbox the
operator names, and a seed the server does not know is refused at connect
(infra/nats_auth.py; docs/operators/bus.md)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nkeys
import pytest
from nats.errors import Error as NatsError

from infra.bus import close, connect
from infra.embedded.nats import EmbeddedNats
from infra.embedded.ports import free_port
from infra.nats_auth import NatsAuth
from tests.support.infra import scratch_dir

pytestmark = pytest.mark.timeout(60)

INBOX = "_INBOX.nkey-proxy"


def _seed_file(root: Path, name: str) -> tuple[Path, str]:
    """A new user seed written 0600, and its public key (what the server lists)."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    path = root / f"{name}.nk"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(seed + b"\n")
    return path, nkeys.from_seed(seed).public_key.decode()


@pytest.fixture(scope="module")
async def nkey_bus() -> AsyncIterator[tuple[str, Path, Path]]:
    """A server that knows one NKey user, allowed its own subjects and inboxes only."""
    root = scratch_dir("toolproxy-test-nkey-nats-")
    known, public = _seed_file(root, "known")
    stranger, _ = _seed_file(root, "stranger")
    # `$JS.API.INFO`: the server's readiness check asks JetStream for the account's info.
    perms = {"publish": {"allow": ["work.>", "$JS.API.INFO"]}, "subscribe": {"allow": ["work.>", f"{INBOX}.>"]},
             "allow_responses": True}
    block = (f"authorization {{\n  users = [\n    {{nkey: {json.dumps(public)}, "
             f"permissions: {json.dumps(perms)}}}\n  ]\n}}\n")
    server = EmbeddedNats(root / "js", free_port(), authorization=block,
                          client=NatsAuth(creds=known, inbox_prefix=INBOX))
    server.start(root / "nats.log")
    try:
        await server.wait_ready()
        yield server.url, known, stranger
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_process_with_an_nkey_seed_connects_and_gets_its_replies(nkey_bus) -> None:  # type: ignore[no-untyped-def]
    url, known, _ = nkey_bus
    auth = NatsAuth.from_env({"TOOLPROXY_NATS_CREDS": str(known), "TOOLPROXY_NATS_INBOX_PREFIX": INBOX})
    assert auth.options(url)["nkeys_seed"] == str(known) and "user" not in auth.options(url)
    nc = await connect(url, name="nkey-test", auth=auth)
    try:
        async def echo(msg):  # type: ignore[no-untyped-def]
            await msg.respond(b"seen:" + msg.data)

        await nc.subscribe("work.echo", cb=echo)
        reply = await nc.request("work.echo", b"hello", timeout=5)
        assert reply.data == b"seen:hello" and reply.subject.startswith(f"{INBOX}.")
    finally:
        await close(nc)


async def test_a_seed_the_server_does_not_know_is_refused(nkey_bus) -> None:  # type: ignore[no-untyped-def]
    url, known, stranger = nkey_bus
    once = {"allow_reconnect": False, "connect_timeout": 2, "max_reconnect_attempts": 0}
    with pytest.raises(NatsError, match="Authorization Violation"):
        await nats.connect(url, **once, **NatsAuth(creds=stranger, inbox_prefix=INBOX).options(url))
    nc = await nats.connect(url, **once, **NatsAuth(creds=known, inbox_prefix=INBOX).options(url))
    await close(nc)  # the same connect with the server's own user's seed is let in
