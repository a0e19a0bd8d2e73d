"""The test NATS server's identities: a user per kind of process, as `toolproxy up` makes them."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from infra.call_keys import encode_private, encode_public
from infra.embedded import nats_auth
from infra.nats_auth import NatsAuth

# Fixed for the session's server (loopback only, gone with it).
TEST_NATS_PASSWORDS = {role: f"test-{role}-password" for role in nats_auth.ROLES}


# The proxy's call-context key in tests (a fixed seed: subprocesses and the session agree).
TEST_CALL_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
TEST_CALL_KEY_TEXT = encode_private(TEST_CALL_KEY)
TEST_CALL_PUBLIC_TEXT = encode_public(TEST_CALL_KEY.public_key())


def call_key_env() -> dict[str, str]:
    """A proxy child's signing key, the one the session's services trust."""
    return {"TOOLPROXY_CALL_CONTEXT_KEY": TEST_CALL_KEY_TEXT}


def suite_authorization() -> str:
    """The test server's users: the services' user serves the built-in tools and the test
    services' (tests.support.fixture_services), the plugin host every other tool."""
    from services.served import SERVED_TOOLS
    from tests.support.fixture_services import TEST_TOOLS

    return nats_auth.authorization_block(TEST_NATS_PASSWORDS, (*SERVED_TOOLS, *TEST_TOOLS))


def role_auth(role: str) -> NatsAuth:
    """How a process of `role` connects to the test server."""
    return NatsAuth(role, TEST_NATS_PASSWORDS[role])


def role_env(role: str, nats_url: str) -> dict[str, str]:
    """A child process's NATS identity: `role` on the session's server; nothing on a server
    of its own (TOOLPROXY_TEST_NATS_URL, a bench's stack), whose URL says who connects."""
    if urlsplit(nats_url).password != TEST_NATS_PASSWORDS["admin"]:
        return {}
    return nats_auth.client_env(role, TEST_NATS_PASSWORDS)


def admin_url(url: str) -> str:
    """The server's URL with the admin user in it: the tests' own clients (spies, tampering)
    connect as the operator would."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"admin:{TEST_NATS_PASSWORDS['admin']}@{parts.netloc}"))


def bare_url(url: str) -> str:
    """The URL without any credentials in it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def signed_headers(meta, subject: str, payload: bytes, deadline_epoch_s: float,  # type: ignore[no-untyped-def]
                   key: Ed25519PrivateKey | None = None) -> dict[str, str]:
    """A request's headers as the proxy sends them, its context signed with `key` (the test
    proxy's by default): for tests that speak to a service straight over the bus."""
    from proxy.core.forward import headers_for
    from proxy.core.signing import ContextSigner
    from wire.call_context import H_CALL_CONTEXT

    headers = headers_for(meta, deadline_epoch_s)
    headers[H_CALL_CONTEXT] = ContextSigner(key or TEST_CALL_KEY).seal(
        meta, subject=subject, body=payload, deadline_epoch_s=deadline_epoch_s)
    return headers
