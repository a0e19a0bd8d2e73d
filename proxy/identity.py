"""Who is calling: the identity a verified token carries, and the shape of its ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Role = Literal["agent", "governance", "admin"]
ROLES: tuple[Role, ...] = ("agent", "governance", "admin")

# Ids travel into NATS headers, log lines and policy input: a tight, ASCII-only alphabet.
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}", re.ASCII)
# For pydantic `pattern=`, which searches (not fullmatch): anchored, and \z-strict in pydantic's
# Rust regex engine (no trailing-newline loophole).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$"


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Identity:
    agent_id: str
    team_id: str
    role: Role
    token_id: str

    @property
    def roles(self) -> list[str]:
        return [self.role]

    @property
    def is_governance(self) -> bool:
        return self.role in ("governance", "admin")

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def actor(self) -> str:
        """Who did it, as audit columns record it (`created_by`, `decided_by`, ...)."""
        return f"{self.role}:{self.agent_id}@{self.team_id}"
