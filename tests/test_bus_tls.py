"""TLS to the bus where the operator gives certificates: TOOLPROXY_NATS_TLS_CA, _CERT and _KEY
reach nats-py, and a server that verifies client certificates admits only a client with one
(infra/nats_auth.py; docs/operators/bus.md)."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from infra.bus import close, connect
from infra.embedded.nats import EmbeddedNats
from infra.embedded.ports import free_port
from infra.nats_auth import NatsAuth, NatsAuthError
from tests.support.bus_auth import TEST_NATS_PASSWORDS, suite_authorization
from tests.support.infra import scratch_dir

pytestmark = pytest.mark.timeout(60)


def _issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
           issuer_key: ec.EllipticCurvePrivateKey | None, *, ca: bool = False) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _write(root: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    (root / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / f"{name}-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@pytest.fixture(scope="module")
async def tls_bus() -> AsyncIterator[tuple[str, Path]]:
    root = scratch_dir("toolproxy-test-tls-nats-")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("toolproxy test CA", ca_key, None, None, ca=True)
    _write(root, "ca", ca, ca_key)
    for name in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        _write(root, name, _issue(name, key, ca.subject, ca_key), key)
    tls = (f"tls {{\n  cert_file: {str(root / 'server.pem')!r}\n  key_file: {str(root / 'server-key.pem')!r}\n"
           f"  ca_file: {str(root / 'ca.pem')!r}\n  verify: true\n}}\n").replace("'", '"')
    client = _auth(root, "admin")
    server = EmbeddedNats(root / "js", free_port(), authorization=suite_authorization() + tls,
                          client=client)
    server.start(root / "nats.log")
    try:
        await server.wait_ready()
        yield server.url, root
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _auth(root: Path, role: str, *, cert: bool = True) -> NatsAuth:
    return NatsAuth(role, TEST_NATS_PASSWORDS[role], tls_ca=root / "ca.pem",
                    tls_cert=root / "client.pem" if cert else None,
                    tls_key=root / "client-key.pem" if cert else None)


async def test_a_client_with_the_operators_certificates_connects_and_works(tls_bus) -> None:  # type: ignore[no-untyped-def]
    url, root = tls_bus
    nc = await connect(url, name="tls-proxy", auth=_auth(root, "proxy"))
    try:
        sub = await nc.subscribe("toolproxy.calls.cancel")
        await nc.publish("toolproxy.calls.cancel", b"x")
        assert (await sub.next_msg(timeout=5)).data == b"x"
        assert nc.connected_url is not None and nc.client_id is not None
    finally:
        await close(nc)


async def test_without_tls_or_without_a_client_certificate_nothing_connects(tls_bus) -> None:  # type: ignore[no-untyped-def]
    """Without the operator's CA the server's certificate is not trusted; without a client
    certificate the server ends the handshake."""
    url, root = tls_bus
    no_ca = {"user": "proxy", "password": TEST_NATS_PASSWORDS["proxy"]}
    with pytest.raises(ssl.SSLCertVerificationError):
        await nats.connect(url, allow_reconnect=False, connect_timeout=2, max_reconnect_attempts=0,
                           **no_ca)
    # The same user, password and CA with a client certificate connect (the test above).
    with pytest.raises((ConnectionError, ssl.SSLError)):  # reset or broken pipe: as the server ends it
        await nats.connect(url, allow_reconnect=False, connect_timeout=2, max_reconnect_attempts=0,
                           **_auth(root, "proxy", cert=False).options())


def test_half_given_settings_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NatsAuthError, match="_CERT and TOOLPROXY_NATS_TLS_KEY go together"):
        NatsAuth(tls_cert=tmp_path / "c.pem").options()
    with pytest.raises(NatsAuthError, match="no readable file"):
        NatsAuth(tls_ca=tmp_path / "missing.pem").options()
    with pytest.raises(NatsAuthError, match="go together"):
        NatsAuth(user="proxy").options()
