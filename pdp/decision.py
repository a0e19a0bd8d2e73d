"""The typed decision, parsed strictly: anything malformed is an error, never an allow."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pdp.errors import PolicyUndefined


class Obligations(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    timeout_ms: int | None = Field(default=None, gt=0)
    rate: dict[str, Any] | None = None
    redact: list[str] = Field(default_factory=list)


class Decision(BaseModel):
    """What the policy decided, plus where it came from."""

    model_config = ConfigDict(frozen=True)

    allow: bool
    require_approval: bool = False
    reasons: list[str] = Field(default_factory=list)
    obligations: Obligations = Obligations()
    decision_id: str = ""
    policy_revision: str = ""
    engine: str = ""
    error_code: str | None = None  # set when the PDP failed closed (pdp_unavailable, ...)

    @classmethod
    def failed_closed(
        cls, code: str, reason: str, *, decision_id: str, engine: str, revision: str
    ) -> Decision:
        return cls(
            allow=False,
            reasons=[reason],
            decision_id=decision_id,
            engine=engine,
            policy_revision=revision,
            error_code=code,
        )


class _Raw(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    allow: bool
    require_approval: bool = False
    reasons: list[str] = Field(default_factory=list, max_length=64)
    obligations: Obligations = Obligations()


def parse_decision(raw: Any, *, decision_id: str, engine: str, revision: str) -> Decision:
    if raw is None:
        raise PolicyUndefined("the policy returned no decision")
    try:
        d = _Raw.model_validate(raw)
    except ValidationError as exc:
        raise PolicyUndefined(f"malformed decision: {exc.errors()[0]['msg']}") from exc
    return Decision(
        allow=d.allow,
        require_approval=d.require_approval and d.allow,
        reasons=d.reasons,
        obligations=d.obligations,
        decision_id=decision_id,
        engine=engine,
        policy_revision=revision,
    )
