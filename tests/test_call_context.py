"""The call context's token on its own: signed with libsodium, a standard Ed25519 signature that
any library verifies, and every malformed or moved token refused with INVALID, never a crash."""

from __future__ import annotations

import base64

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wire import call_context as cc

SUBJECT = "tools.math.invoke"
BODY = b'{"args":{"expr":"1+2"}}'
FIELDS = {"call": "c-1", "decision": "d-1", "team": "team-a", "agent": "agent-1", "run": None,
          "turn": None, "confidential": False, "approval": None, "approval_ref": None,
          "replica": None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _token(key: Ed25519PrivateKey, now_ms: int = 1_000_000) -> str:
    return cc.Sealer(key).seal(subject=SUBJECT, body=BODY, exp_ms=now_ms + 5_000, now_ms=now_ms,
                               fields=FIELDS)


def test_a_sealed_context_is_a_standard_ed25519_signature(key: Ed25519PrivateKey) -> None:
    token = _token(key)
    head, sig = token.split(".")
    payload, signature = _unb64(head), _unb64(sig)
    key.public_key().verify(signature, payload)  # cryptography (OpenSSL) accepts it as is
    assert signature == key.sign(payload)  # Ed25519 is deterministic: the same bytes
    claims = orjson.loads(payload)
    assert claims["kid"] == cc.Sealer(key).kid == cc.key_id(key.public_key())
    keys = cc.verifying_keys({cc.key_id(key.public_key()): key.public_key()})
    assert cc.unseal(token, keys, subject=SUBJECT, body=BODY, now_ms=1_000_001)["team"] == "team-a"


def test_a_token_not_as_signed_is_invalid(key: Ed25519PrivateKey) -> None:
    keys = cc.verifying_keys({cc.key_id(key.public_key()): key.public_key()})
    head, sig = _token(key).split(".")
    claims = orjson.loads(_unb64(head))
    moved = _b64(orjson.dumps({**claims, "team": "team-b"}))  # the claims edited, signature kept
    signature = _unb64(sig)
    bad = {
        "claims edited": f"{moved}.{sig}",
        "signature cut short": f"{head}.{_b64(signature[:-1])}",
        "signature with bytes after it": f"{head}.{_b64(signature + b'x')}",
        "signature flipped": f"{head}.{_b64(bytes([signature[0] ^ 1]) + signature[1:])}",
        "no signature": f"{head}.",
    }
    for note, token in bad.items():
        with pytest.raises(cc.ContextRefused) as refused:
            cc.unseal(token, keys, subject=SUBJECT, body=BODY, now_ms=1_000_001)
        assert refused.value.code == cc.INVALID, note


def test_another_keys_context_is_invalid(key: Ed25519PrivateKey) -> None:
    other = Ed25519PrivateKey.generate()
    # Trusted under the signer's id, but another key's bytes: the signature must not verify.
    keys = cc.verifying_keys({cc.key_id(key.public_key()): other.public_key()})
    with pytest.raises(cc.ContextRefused) as refused:
        cc.unseal(_token(key), keys, subject=SUBJECT, body=BODY, now_ms=1_000_001)
    assert refused.value.code == cc.INVALID
