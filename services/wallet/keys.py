"""The teams' signing keys, held in this process only: never returned, logged or printed."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.datastructures import SignedTransaction
from eth_account.signers.local import LocalAccount

from wire.ids import is_valid_id

_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}", re.ASCII)


class KeyFileError(ValueError):
    """A keys file that cannot be used (its message never contains a key)."""


class WalletKeys:
    def __init__(self) -> None:
        self._accounts: dict[str, LocalAccount] = {}

    def __repr__(self) -> str:  # never the keys
        return f"WalletKeys({len(self._accounts)} teams)"

    @classmethod
    def from_file(cls, path: Path) -> WalletKeys:
        """A JSON object {team_id: hex private key}, readable by its owner only."""
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise KeyFileError(f"wallet keys file {path}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(f"wallet keys file {path} is readable by others: chmod 600 it")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            raise KeyFileError(f"wallet keys file {path} is not a JSON object") from None
        if not isinstance(data, dict):
            raise KeyFileError(f"wallet keys file {path} is not a JSON object")
        keys = cls()
        for team, key in data.items():
            keys.add(team, key)
        return keys

    def add(self, team_id: Any, private_key: Any) -> None:
        if not is_valid_id(team_id):
            raise KeyFileError("a team id in the wallet keys is not a valid id")
        if not isinstance(private_key, str) or _KEY.fullmatch(private_key) is None:
            raise KeyFileError(f"the key of team {team_id!r} is not 32 bytes of hex")
        self._accounts[team_id] = Account.from_key(private_key)

    def address(self, team_id: str) -> str | None:
        account = self._accounts.get(team_id)
        return account.address if account is not None else None

    def sign(self, team_id: str, tx: dict[str, Any]) -> SignedTransaction:
        return self._accounts[team_id].sign_transaction(tx)
