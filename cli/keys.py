"""`toolproxy keys`: the dev issuer's key set (rotate, list). A rotation adds a key that new
tokens are signed with and keeps the previous ones verifying for a grace period; every replica
sharing the file picks it up within a second, without a restart."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.common import data_dir_of
from cli.errors import CliError
from proxy.config import Settings
from proxy.identity import devkeys

_GRACE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_grace(text: str) -> float:
    text = text.strip()
    unit = text[-1:] if text[-1:] in _GRACE_UNITS else "s"
    number = text[:-1] if text[-1:] in _GRACE_UNITS else text
    if not number.isdigit():
        raise argparse.ArgumentTypeError("a grace period like 0, 90s, 15m, 24h or 7d")
    return float(int(number) * _GRACE_UNITS[unit])


def _path(a: argparse.Namespace) -> tuple[Path, Path | None]:
    """(the key set file, the legacy HS256 key it may start from)."""
    settings = Settings(data_dir=data_dir_of(a.data_dir))
    if a.keys_file:
        return Path(a.keys_file), None
    if settings.jwt_keys_file is not None:
        return settings.jwt_keys_file, None
    if settings.jwt_secret is not None:
        raise CliError("TOOLPROXY_JWT_SECRET is one static key and cannot rotate: make a key set "
                       "(`toolproxy keys rotate --keys-file FILE`), give it to every replica as "
                       "TOOLPROXY_JWT_KEYS_FILE beside the secret, then drop the secret")
    return settings.data_dir / devkeys.KEYS_FILE, settings.data_dir / devkeys.LEGACY_KEY_FILE


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


def cmd_keys(a: argparse.Namespace) -> int:
    path, legacy = _path(a)
    if a.action == "rotate":
        try:
            fresh, kept = devkeys.rotate(path, alg=a.alg, grace_s=a.grace, legacy_secret_file=legacy)
        except ValueError as exc:
            raise CliError(f"keys rotate: {exc}") from None
        print(f"new signing key {fresh.kid} ({fresh.alg}) in {path}")
        for k in kept:
            print(f"  {k.kid} ({k.alg}) verifies until {_when(k.not_after)}")
        return 0
    if not path.exists():
        raise CliError(f"no key set at {path} (`toolproxy keys rotate` makes one)")
    try:
        keyset = devkeys.load(path)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    now = time.time()
    for k in keyset.keys:
        state = ("current" if k.kid == keyset.current else
                 "retired" if k.not_after is not None and k.not_after <= now else
                 f"verifies until {_when(k.not_after)}")
        print(f"{k.kid:<32} {k.alg:<6} created {_when(k.created_at)}  {state}")
    return 0


def add_parser(add: Callable[..., Any]) -> None:
    sp = add("keys", cmd_keys, "the dev issuer's signing keys: rotate or list them")
    sp.add_argument("action", choices=["rotate", "list"])
    sp.add_argument("--alg", choices=list(devkeys.ALGS), default=devkeys.DEFAULT_ALG,
                    help="the new key's algorithm (default ES256: its public key is published "
                         "at /.well-known/jwks.json; HS256 keys are secrets, never published)")
    sp.add_argument("--grace", type=parse_grace, default=float(devkeys.DEFAULT_GRACE_S),
                    help="how long the previous keys keep verifying (default 24h)")
    sp.add_argument("--keys-file", help="the key set (default: TOOLPROXY_JWT_KEYS_FILE, else the "
                                        "data dir's secrets/jwt-keys.json)")
    sp.add_argument("--data-dir")
