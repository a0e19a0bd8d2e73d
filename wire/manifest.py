"""The catalog entry every tool declares: classification, schemas, deadline and price."""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wire.bounds import max_json_bytes
from wire.categories import CATEGORIES
from wire.token_estimate import TokenEstimate

# ASCII only: fullmatch with re.ASCII so look-alike letters and a trailing newline never pass.
TOOL_NAME_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", re.ASCII)
TOOL_NAME_MAX = 64
MAX_ARGS_BYTES_CAP = 64 << 20
# An upstream MCP tool's version is its pin (services/upstreams): "pin-" and its hash's head.
PIN_PREFIX = "pin-"


@functools.lru_cache(maxsize=1024)
def _schema_problem(canonical: bytes) -> str | None:
    """Meta-schema check, memoized: heartbeats and replicas re-validate the same schemas."""
    try:
        Draft202012Validator.check_schema(orjson.loads(canonical))
    except SchemaError as exc:
        return exc.message
    return None


def is_valid_tool_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and 0 < len(name) <= TOOL_NAME_MAX
        and TOOL_NAME_RE.fullmatch(name) is not None
    )


class Cost(BaseModel):
    """Price of a call, in 1T units: a fixed part plus metered tokens and compute units."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_call: float = Field(default=0.0, ge=0)
    per_token: float = Field(default=0.0, ge=0)
    per_compute_unit: float = Field(default=0.0, ge=0)

    def price(self, tokens_used: int, compute_units: float) -> float:
        return self.per_call + tokens_used * self.per_token + compute_units * self.per_compute_unit


class ToolManifest(BaseModel):
    """One catalog entry. `category` and `action` have no default: unclassified tools are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_id: str
    version: str = Field(default="1.0.0", max_length=32)
    category: Literal["A", "B", "C", "D"]
    action: Literal["read", "write"]
    risk: Literal["low", "medium", "high", "critical"] | None = None
    cost: Cost = Cost()
    network: bool = False
    plugin: bool = False  # served by the plugin runtime (third-party code): never in confidential mode
    requires_approval: bool = False
    # Held for approval, the call is first prepared by its service (tools.<id>.prepare): the
    # approval shows exactly what will run and is bound to its hash.
    approval_preview: bool = False
    description: str = Field(max_length=2_000)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    timeout_ms: int | None = Field(default=None, gt=0)
    # Metered tools (an LLM): how the proxy estimates a call's tokens from its arguments, to
    # reserve them against the team's token quota before the call runs.
    token_estimate: TokenEstimate | None = None
    # The most bytes the arguments may take as compact JSON; checked by the proxy before the
    # input schema. Default: what the input schema bounds, else the category's default.
    max_args_bytes: int | None = Field(default=None, gt=0, le=MAX_ARGS_BYTES_CAP)

    @field_validator("tool_id")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_valid_tool_name(value):
            raise ValueError(
                f"tool name must match {TOOL_NAME_RE.pattern} and be at most {TOOL_NAME_MAX} chars"
            )
        return value

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = _schema_problem(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
        if problem is not None:
            raise ValueError(f"not a valid JSON Schema: {problem}")
        if value.get("type") != "object":
            raise ValueError("a tool's schemas must describe a JSON object")
        return value

    @model_validator(mode="after")
    def _defaults(self) -> ToolManifest:
        spec = CATEGORIES[self.category]
        # Fill derived defaults; frozen models are filled through object.__setattr__.
        if self.risk is None:
            object.__setattr__(self, "risk", spec.default_risk)
        if self.timeout_ms is None:
            object.__setattr__(self, "timeout_ms", spec.timeout_ms)
        elif self.timeout_ms > spec.timeout_ms:
            raise ValueError(
                f"timeout_ms {self.timeout_ms} exceeds category {self.category}'s {spec.timeout_ms}"
            )
        if self.token_estimate is not None:
            problem = self.token_estimate.problem(self.input_schema)
            if problem is not None:
                raise ValueError(f"token_estimate: {problem}")
        if self.max_args_bytes is None:
            derived = max_json_bytes(self.input_schema)
            bound = spec.max_args_bytes if derived is None else min(derived, MAX_ARGS_BYTES_CAP)
            object.__setattr__(self, "max_args_bytes", bound)
        if self.category == "D" and not self.requires_approval:
            object.__setattr__(self, "requires_approval", True)
        return self

    @property
    def from_upstream(self) -> bool:
        """Served by the upstream bridge: an existing MCP server's tool, classified and pinned."""
        return self.network and self.version.startswith(PIN_PREFIX)

    @property
    def name(self) -> str:
        return self.tool_id

    @property
    def capability(self) -> str:
        return f"tool.{self.tool_id}.invoke"

    @property
    def subject(self) -> str:
        return f"tools.{self.tool_id}.invoke"

    @property
    def deadline_ms(self) -> int:
        assert self.timeout_ms is not None
        return self.timeout_ms

    def entry(self, *, available: bool) -> dict[str, Any]:
        """The catalog entry as the API shows it."""
        data = self.model_dump(mode="json")
        if data["token_estimate"] is None:  # shown only by the metered tools that declare one
            del data["token_estimate"]
        data["capability"] = self.capability
        data["available"] = available
        return data
