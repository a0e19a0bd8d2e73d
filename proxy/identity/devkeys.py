"""The dev issuer's key set: the keys `toolproxy token` signs with and every replica verifies
with, in one JSON file (TOOLPROXY_JWT_KEYS_FILE, or the data dir's secrets/jwt-keys.json for
`toolproxy up`), 0600.

Each key has a `kid` (every token names it), an algorithm and, once rotated away, the time its
grace ends. `toolproxy keys rotate` adds a key and makes it the one new tokens are signed
with; the previous key keeps verifying until its grace ends. New sets hold ES256 keys, so the
issuer can publish its JWKS (GET /.well-known/jwks.json) and anything can verify its tokens
without a secret; HS256 keys are accepted for existing setups (`--alg HS256`, the old data
dir key, TOOLPROXY_JWT_SECRET) and never published. The file also holds a random secret of
its own that keys the replicas' MCP session ids (it survives rotations)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import math
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from jwt.algorithms import ECAlgorithm, OKPAlgorithm

from proxy.identity.keys import KID_RE, Key, public_part

KEYS_FILE = Path("secrets") / "jwt-keys.json"
LEGACY_KEY_FILE = Path("secrets") / "jwt.key"  # the HS256 secret of data dirs made before key sets
ALGS = ("ES256", "EdDSA", "HS256")
DEFAULT_ALG = "ES256"
DEFAULT_GRACE_S = 24 * 3600


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def secret_kid(secret: str) -> str:
    """The kid of an HS256 secret given as such (TOOLPROXY_JWT_SECRET, the old dev key): stable,
    and telling nothing of the secret."""
    return "hs256-" + hashlib.sha256(b"toolproxy-kid\0" + secret.encode()).hexdigest()[:12]


def secret_jwk(secret: str) -> dict[str, Any]:
    return {"kty": "oct", "k": b64(secret.encode()), "alg": "HS256"}


@dataclass(slots=True)
class DevKey:
    kid: str
    alg: str
    jwk: dict[str, Any]  # private members included where the file has them
    created_at: float
    not_after: float | None = None  # the end of its grace, once rotated away
    legacy: bool = False

    @property
    def can_sign(self) -> bool:
        return "d" in self.jwk or "k" in self.jwk

    def key(self) -> Key:
        jwk = self.jwk if self.alg == "HS256" else public_part(self.jwk)
        return Key(self.kid, jwk, alg=self.alg, legacy=self.legacy,
                   not_after=math.inf if self.not_after is None else self.not_after)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kid": self.kid, "alg": self.alg, "created_at": int(self.created_at),
                               "not_after": None if self.not_after is None else int(self.not_after),
                               "jwk": self.jwk}
        if self.legacy:
            out["legacy"] = True
        return out


@dataclass(slots=True)
class DevKeySet:
    keys: list[DevKey]
    current: str
    session_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def signing_key(self) -> DevKey:
        key = next((k for k in self.keys if k.kid == self.current), None)
        if key is None or not key.can_sign:
            raise ValueError("the key set has no private key to sign with (a verification-only copy)")
        return key

    def verification_keys(self) -> dict[str, Key]:
        return {k.kid: k.key() for k in self.keys}

    def public_jwks(self, now: float | None = None) -> dict[str, Any]:
        """The asymmetric keys still valid, public parts only (secrets are never published)."""
        now = time.time() if now is None else now
        return {"keys": [{**public_part(k.jwk), "kid": k.kid, "alg": k.alg, "use": "sig"}
                         for k in self.keys
                         if k.alg != "HS256" and (k.not_after is None or k.not_after > now)]}

    def as_json(self) -> dict[str, Any]:
        return {"version": 1, "current": self.current, "session_secret": self.session_secret,
                "keys": [k.as_json() for k in self.keys]}


def new_key(alg: str = DEFAULT_ALG, now: float | None = None) -> DevKey:
    now = time.time() if now is None else now
    if alg not in ALGS:
        raise ValueError(f"the dev issuer's algorithms are {', '.join(ALGS)}, not {alg!r}")
    kid = f"{alg.lower()}-{time.strftime('%Y%m%d', time.gmtime(now))}-{secrets.token_hex(4)}"
    if alg == "ES256":
        jwk = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()), as_dict=True)
    elif alg == "EdDSA":
        jwk = OKPAlgorithm.to_jwk(ed25519.Ed25519PrivateKey.generate(), as_dict=True)
    else:
        jwk = {"kty": "oct", "k": b64(secrets.token_bytes(32))}
    return DevKey(kid=kid, alg=alg, jwk={**jwk, "alg": alg}, created_at=now)


def parse(doc: Any) -> DevKeySet:
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("keys"), list):
        raise ValueError("not a toolproxy key set (version 1, with a `keys` list)")
    keys = []
    for raw in doc["keys"]:
        if not isinstance(raw, dict) or not KID_RE.fullmatch(str(raw.get("kid", ""))):
            raise ValueError("every key needs a kid of printable characters")
        if raw.get("alg") not in ALGS or not isinstance(raw.get("jwk"), dict):
            raise ValueError(f"key {raw['kid']}: alg must be one of {', '.join(ALGS)}, with a jwk")
        not_after = raw.get("not_after")
        keys.append(DevKey(kid=raw["kid"], alg=raw["alg"], jwk=raw["jwk"],
                           created_at=float(raw.get("created_at") or 0),
                           not_after=None if not_after is None else float(not_after),
                           legacy=bool(raw.get("legacy", False))))
    if not keys or doc.get("current") not in {k.kid for k in keys}:
        raise ValueError("the key set names no current key among its keys")
    secret = doc.get("session_secret")
    return DevKeySet(keys=keys, current=doc["current"],
                     **({"session_secret": secret} if isinstance(secret, str) and secret else {}))


def load(path: Path) -> DevKeySet:
    try:
        return parse(orjson.loads(path.read_bytes()))
    except orjson.JSONDecodeError:
        raise ValueError(f"{path} is not JSON") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def write(path: Path, keyset: DevKeySet) -> None:
    """Atomically, 0600 (the directory 0700 when it is made here)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(keyset.as_json(), option=orjson.OPT_INDENT_2))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure(path: Path, *, legacy_secret_file: Path | None = None, alg: str = DEFAULT_ALG) -> DevKeySet:
    """The key set at `path`, made on first use: from the old HS256 data dir key where one
    exists (its tokens keep working), else with a new key."""
    with _locked(path):
        if path.exists():
            return load(path)
        if legacy_secret_file is not None and legacy_secret_file.exists():
            secret = legacy_secret_file.read_text().strip()
            key = DevKey(kid=secret_kid(secret), alg="HS256", jwk=secret_jwk(secret),
                         created_at=legacy_secret_file.stat().st_mtime, legacy=True)
        else:
            key = new_key(alg)
        keyset = DevKeySet(keys=[key], current=key.kid)
        write(path, keyset)
        return keyset


def rotate(path: Path, *, alg: str = DEFAULT_ALG, grace_s: float = DEFAULT_GRACE_S,
           now: float | None = None, legacy_secret_file: Path | None = None) -> tuple[DevKey, list[DevKey]]:
    """Adds a key and makes it current; every other key still unbounded verifies `grace_s`
    more; keys whose grace has ended are dropped. Returns (the new key, the keys kept)."""
    now = time.time() if now is None else now
    if grace_s < 0:
        raise ValueError("the grace period cannot be negative")
    if not path.exists() and not (legacy_secret_file is not None and legacy_secret_file.exists()):
        made = ensure(path, alg=alg)  # the first key: nothing to rotate away
        return made.signing_key(), []
    ensure(path, legacy_secret_file=legacy_secret_file, alg=alg)
    with _locked(path):
        keyset = load(path)
        fresh = new_key(alg, now)
        kept = []
        for k in keyset.keys:
            if k.not_after is not None and k.not_after <= now:
                continue  # its grace is over: gone
            if k.not_after is None:
                k.not_after = now + grace_s
            kept.append(k)
        keyset.keys = [fresh, *kept]
        keyset.current = fresh.kid
        write(path, keyset)
        return fresh, kept
