"""The proxy's signature on every call context it hands a service (wire.call_context)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from infra.call_keys import private_key
from wire import call_context as cc

if TYPE_CHECKING:
    from proxy.core.forward import CallMeta


class ContextSigner:
    """Holds the private key; only the proxy has one."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._sealer = cc.Sealer(key)
        self.key_id = self._sealer.kid

    @classmethod
    def from_text(cls, text: str) -> ContextSigner:
        return cls(private_key(text))

    def seal(self, meta: CallMeta, *, subject: str, body: bytes, deadline_epoch_s: float) -> str:
        fields = {"call": meta.call_id, "decision": meta.decision_id, "team": meta.team_id,
                  "agent": meta.agent_id, "run": meta.run_id, "turn": meta.turn_id,
                  "confidential": meta.confidential, "approval": meta.approval,
                  "approval_ref": meta.approval_ref, "replica": meta.replica}
        return self._sealer.seal(subject=subject, body=body, exp_ms=int(deadline_epoch_s * 1000),
                                 now_ms=int(time.time() * 1000), fields=fields)
