"""A tool's declared way to estimate a call's tokens from its arguments, before it runs: the
proxy reserves the estimate against the team's daily token quota and settles it to the tokens
the tool reports (`tokens_used`) once the call is over."""

from __future__ import annotations

import math
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

ArgName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]


class TokenEstimate(BaseModel):
    """tokens = ceil(JSON bytes of `prompt_args` / `bytes_per_token`)
             + the integer argument `completion_arg` (or `default_completion` without it)
             + `per_call`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_args: tuple[ArgName, ...] = Field(min_length=1, max_length=8)
    bytes_per_token: float = Field(default=4.0, ge=1.0, le=64.0)
    completion_arg: ArgName | None = None
    default_completion: int = Field(default=0, ge=0, le=1_000_000)
    per_call: int = Field(default=0, ge=0, le=1_000_000)

    def tokens(self, args: dict[str, Any]) -> int:
        size = sum(len(orjson.dumps(args[a])) for a in self.prompt_args if a in args)
        completion = args.get(self.completion_arg) if self.completion_arg else None
        if not isinstance(completion, int) or isinstance(completion, bool) or completion < 0:
            completion = self.default_completion
        return math.ceil(size / self.bytes_per_token) + completion + self.per_call

    def problem(self, input_schema: dict[str, Any]) -> str | None:
        """Why this estimate does not fit the tool's input schema (None when it does): every
        named argument is a declared property, and the completion argument a bounded integer
        (an estimate must be bounded for a quota to mean anything)."""
        props = input_schema.get("properties")
        if not isinstance(props, dict):
            return "the input schema declares no properties"
        for name in self.prompt_args:
            if name not in props:
                return f"prompt argument {name!r} is not in the input schema"
        if self.completion_arg is not None:
            spec = props.get(self.completion_arg)
            if not isinstance(spec, dict) or spec.get("type") != "integer":
                return f"completion argument {self.completion_arg!r} is not an integer property"
            bound = spec.get("maximum")
            if not isinstance(bound, int) or bound > 1_000_000:
                return f"completion argument {self.completion_arg!r} needs a maximum of at most 1000000"
        return None
