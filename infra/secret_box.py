"""The external APIs' secrets at rest: AES-256-GCM, each bound to its API's name (a sealed
secret moved to another row does not open), the key from TOOLPROXY_SECRETS_KEY or generated
once into the data dir (0600) like the JWT key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import SecretStr

KEY_FILE = Path("secrets") / "external_apis.key"
NONCE_BYTES = 12


class SecretUnavailable(Exception):
    """The secret cannot be recovered (another key, a damaged row, a missing file)."""


def encode_key(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii")


class SecretBox:
    """Seals and opens secrets; the key is loaded (or created) on first use."""

    def __init__(self, key: SecretStr | None, data_dir: Path) -> None:
        self._configured = key
        self._data_dir = data_dir
        self._aead: AESGCM | None = None
        self._key_id = ""

    def _load(self) -> AESGCM:
        if self._aead is None:
            try:
                raw = _decode(self._configured.get_secret_value()) if self._configured else _key_file(self._data_dir)
            except (OSError, ValueError) as exc:
                raise SecretUnavailable(f"no usable secrets key: {exc}") from None
            self._aead = AESGCM(raw)
            self._key_id = hashlib.sha256(b"toolproxy-secret-key:" + raw).hexdigest()[:16]
        return self._aead

    @property
    def key_id(self) -> str:
        self._load()
        return self._key_id

    def seal(self, name: str, secret: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._load().encrypt(nonce, secret.encode("utf-8"), name.encode("utf-8"))

    def open(self, name: str, sealed: bytes, key_id: str) -> str:
        aead = self._load()
        if key_id != self._key_id:
            raise SecretUnavailable("the secret was sealed with another key")
        try:
            plain = aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], name.encode("utf-8"))
        except (InvalidTag, ValueError):
            raise SecretUnavailable("the sealed secret does not open") from None
        return plain.decode("utf-8")


def _decode(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text.strip().encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ValueError("TOOLPROXY_SECRETS_KEY is not urlsafe base64") from None
    if len(raw) != 32:
        raise ValueError("TOOLPROXY_SECRETS_KEY must encode 32 bytes")
    return raw


def _key_file(data_dir: Path) -> bytes:
    """The data dir's key, created atomically: the proxy and the services may both be first,
    and a reader never sees a half-written file (written aside, then linked into place)."""
    path = data_dir / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(encode_key(secrets.token_bytes(32)))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # someone else was first: theirs is the key
        finally:
            tmp.unlink()
    return _decode(path.read_text())
