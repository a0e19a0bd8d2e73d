"""What a policy's decisions read of the input, as the policy itself declares it
(`data.toolproxy.authz.input_reads`): the decision cache keys on that and nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from regopy import Interpreter, RegoError

from pdp.policy_set import PolicySet

QUERY = "data.toolproxy.authz.input_reads"


@dataclass(frozen=True, slots=True)
class InputReads:
    args_of: frozenset[str] | None = None  # tools whose decision reads `args`; None: every tool
    agent_run_id: bool = True

    def reads_args(self, tool_id: str) -> bool:
        return self.args_of is None or tool_id in self.args_of


EVERYTHING = InputReads()


def declared_reads(policies: PolicySet) -> InputReads:
    """The declaration, evaluated once per revision (not per decision); anything missing or
    malformed means "reads everything" (exact cache keys, as safe as no declaration)."""
    rego = Interpreter()
    try:
        for name, source in policies.modules.items():
            rego.add_module(name, source)
        out = str(rego.query(QUERY))
    except (RegoError, ValueError):
        return EVERYTHING
    if out == "undefined":
        return EVERYTHING
    try:
        value: Any = orjson.loads(out)["expressions"][0]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return EVERYTHING
    if not isinstance(value, dict):
        return EVERYTHING
    args = value.get("args")
    if not (isinstance(args, list) and all(isinstance(t, str) for t in args)) or "*" in args:
        args_of = None
    else:
        args_of = frozenset(args)
    return InputReads(args_of=args_of, agent_run_id=value.get("agent_run_id") is not False)
