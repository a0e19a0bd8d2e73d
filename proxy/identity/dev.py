"""The dev issuer's verification keys on a replica: the key set file (re-read when it changes,
looked at no more than once a second), TOOLPROXY_JWT_SECRET (one HS256 key; tokens without a
kid verify with it), and TOOLPROXY_JWT_PUBLIC_KEY_FILE (one static public key)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from proxy.config import Settings
from proxy.identity import devkeys
from proxy.identity.keys import Key

log = structlog.get_logger("toolproxy.identity")
CHECK_EVERY_S = 1.0


def keys_file(settings: Settings) -> Path:
    """Where the dev issuer's key set is: TOOLPROXY_JWT_KEYS_FILE, else the data dir's."""
    return settings.jwt_keys_file if settings.jwt_keys_file is not None else settings.data_dir / devkeys.KEYS_FILE


def uses_data_dir_keys(settings: Settings) -> bool:
    """No key given by the deployment: the data dir's key set signs (a development run)."""
    return (settings.jwt_keys_file is None and settings.jwt_secret is None
            and settings.jwt_public_key_file is None)


def load_keyset(settings: Settings, *, create: bool) -> devkeys.DevKeySet | None:
    """The key set file's keys; the data dir's is made on first use when `create` (TOOLPROXY_
    JWT_KEYS_FILE never is: a replica making a key of its own is what this file prevents)."""
    path = keys_file(settings)
    if settings.jwt_keys_file is not None:
        if not path.exists():
            raise ValueError(f"TOOLPROXY_JWT_KEYS_FILE: no key set at {path} (make one with "
                             f"`toolproxy keys rotate --keys-file {path}`)")
        return devkeys.load(path)
    if not uses_data_dir_keys(settings):
        return None
    legacy = settings.data_dir / devkeys.LEGACY_KEY_FILE
    if create:
        return devkeys.ensure(path, legacy_secret_file=legacy)
    if path.exists():
        return devkeys.load(path)
    if legacy.exists():  # a data dir from before key sets, not started since: its one key
        secret = legacy.read_text().strip()
        kid = devkeys.secret_kid(secret)
        return devkeys.DevKeySet(keys=[devkeys.DevKey(kid=kid, alg="HS256", jwk=devkeys.secret_jwk(secret),
                                                      created_at=0.0, legacy=True)], current=kid)
    return None


def static_keys(settings: Settings) -> dict[str, Key]:
    out: dict[str, Key] = {}
    if settings.jwt_secret is not None:
        secret = settings.jwt_secret.get_secret_value()
        kid = devkeys.secret_kid(secret)
        out[kid] = Key(kid, devkeys.secret_jwk(secret), alg="HS256", legacy=True)
    if settings.jwt_public_key_file is not None:
        pem = load_pem_public_key(settings.jwt_public_key_file.read_bytes())
        jwk = (RSAAlgorithm.to_jwk(pem, as_dict=True) if settings.jwt_algorithm == "RS256"
               else ECAlgorithm.to_jwk(pem, as_dict=True))
        out["static"] = Key("static", jwk, alg=settings.jwt_algorithm, legacy=True)
    return out


class DevKeys:
    """What verifies the dev issuer's tokens on this replica, kept current with the file."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
        self._path = keys_file(settings) if not (settings.jwt_keys_file is None
                                                  and not uses_data_dir_keys(settings)) else None
        self.clock = clock
        self._static = static_keys(settings)
        keyset = load_keyset(settings, create=True)
        self._stamp = self._stat()
        self._checked = time.monotonic()
        self.keyset = keyset
        self.keys = {**(keyset.verification_keys() if keyset else {}), **self._static}

    def _stat(self) -> tuple[int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def current(self, force: bool = False) -> dict[str, Key]:
        """The keys, re-read when the file changed (looked at once a second at most, or now)."""
        if self._path is None:
            return self.keys
        mono = time.monotonic()
        if not force and mono - self._checked < CHECK_EVERY_S:
            return self.keys
        self._checked = mono
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return self.keys
        try:
            keyset = devkeys.load(self._path)
        except (OSError, ValueError) as exc:
            log.error("dev_keys_reload_failed", path=str(self._path), error=str(exc)[:300])
            return self.keys
        fresh = {**keyset.verification_keys(), **self._static}
        for kid, old in self.keys.items():  # keep verified tokens tied to keys still there
            new = fresh.get(kid)
            if new is None or new.jwk != old.jwk:
                old.live = False
            else:
                old.not_after = new.not_after
                fresh[kid] = old
        self.keys, self.keyset, self._stamp = fresh, keyset, stamp
        log.info("dev_keys_reloaded", keys=sorted(fresh), current=keyset.current)
        return self.keys

    def state(self) -> dict[str, object]:
        now = self.clock()
        valid = [k for k in self.current().values() if k.valid(now)]
        return {"state": "fresh" if valid else "expired", "keys": len(valid)}

    def usable(self) -> bool:
        now = self.clock()
        return any(k.valid(now) for k in self.current().values())
