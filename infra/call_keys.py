"""The call-context keys: the proxy's Ed25519 private key and the public keys services trust.

A key is written as base64 of its 32 raw bytes (one line: easy in a Secret or an env var) or
as PEM. Several public keys may be trusted at once (one per line, or comma-separated): rotate
by trusting the new public key everywhere first, then signing with the new private key, then
dropping the old public key (docs/operators/bus.md).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding, NoEncryption, PrivateFormat, PublicFormat, load_pem_private_key, load_pem_public_key)

from wire.call_context import key_id

PRIVATE_ENV, PRIVATE_FILE_ENV = "TOOLPROXY_CALL_CONTEXT_KEY", "TOOLPROXY_CALL_CONTEXT_KEY_FILE"
PUBLIC_ENV, PUBLIC_FILE_ENV = "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS_FILE"


class CallKeyError(ValueError):
    """A call-context key is missing or unreadable."""


def private_key(text: str) -> Ed25519PrivateKey:
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = load_pem_private_key(text.encode(), password=None)
            if not isinstance(key, Ed25519PrivateKey):
                raise CallKeyError("the call-context key must be an Ed25519 key")
            return key
        return Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error) as exc:
        if isinstance(exc, CallKeyError):
            raise
        raise CallKeyError("the call-context key is neither PEM nor base64 of 32 bytes") from None


def public_keys(text: str) -> dict[str, Ed25519PublicKey]:
    """By key id; PEM blocks or base64 lines (or comma-separated)."""
    keys: list[Ed25519PublicKey] = []
    if "-----BEGIN" in text:
        for block in text.split("-----END PUBLIC KEY-----"):
            if "-----BEGIN" in block:
                key = load_pem_public_key((block.strip() + "\n-----END PUBLIC KEY-----\n").encode())
                if not isinstance(key, Ed25519PublicKey):
                    raise CallKeyError("a call-context public key must be an Ed25519 key")
                keys.append(key)
    else:
        for item in text.replace(",", "\n").split():
            try:
                keys.append(Ed25519PublicKey.from_public_bytes(base64.b64decode(item, validate=True)))
            except (ValueError, binascii.Error):
                raise CallKeyError("a call-context public key is not base64 of 32 bytes") from None
    if not keys:
        raise CallKeyError("no call-context public key given")
    return {key_id(k): k for k in keys}


def encode_private(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())).decode()


def encode_public(key: Ed25519PublicKey) -> str:
    return base64.b64encode(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def _value(env: Mapping[str, str], name: str, file_name: str) -> str | None:
    if env.get(name):
        return env[name]
    path = env.get(file_name)
    if path:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise CallKeyError(f"{file_name}: cannot read {path}: {exc.strerror}") from None
    return None


def signing_key_from_env(env: Mapping[str, str] | None = None) -> Ed25519PrivateKey | None:
    text = _value(os.environ if env is None else env, PRIVATE_ENV, PRIVATE_FILE_ENV)
    return private_key(text) if text is not None else None


def trusted_keys_from_env(env: Mapping[str, str] | None = None) -> dict[str, Ed25519PublicKey]:
    text = _value(os.environ if env is None else env, PUBLIC_ENV, PUBLIC_FILE_ENV)
    if text is None:
        raise CallKeyError(f"{PUBLIC_ENV} (or {PUBLIC_FILE_ENV}) is not set: a service verifies "
                           "every call's signed context with the proxy's public key")
    return public_keys(text)


def ensure_pair(secrets_dir: Path) -> tuple[Path, Path]:
    """`toolproxy up`'s pair: (private key file, 0600; public key file), made on first use."""
    private, public = secrets_dir / "call_context.key", secrets_dir / "call_context.pub"
    if not private.exists():
        secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = Ed25519PrivateKey.generate()
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(encode_private(key) + "\n")
        public.write_text(encode_public(key.public_key()) + "\n")
    elif not public.exists():
        public.write_text(encode_public(private_key(private.read_text()).public_key()) + "\n")
    return private, public
