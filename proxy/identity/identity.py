"""Who is calling: the identity a verified token carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["agent", "governance", "admin"]
ROLES: tuple[Role, ...] = ("agent", "governance", "admin")


@dataclass(frozen=True, slots=True)
class Identity:
    agent_id: str
    team_id: str
    role: Role
    token_id: str
    # The token's OAuth scopes (sorted; empty for the dev issuer's tokens): they reach the
    # policy as `subject.scopes` (tool.<name>.invoke scopes narrow what the token may call).
    scopes: tuple[str, ...] = ()
    issuer: str = ""  # the configured name of the issuer that signed the token

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
