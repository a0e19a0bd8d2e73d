"""What a policy's decisions read of the input, as the policy itself declares it
(`data.toolproxy.authz.input_reads`): the decision cache keys on that and nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re

import orjson
from regopy import Interpreter, RegoError

from pdp.policy_set import PolicySet

QUERY = "data.toolproxy.authz.input_reads"


@dataclass(frozen=True, slots=True)
class InputReads:
    args_of: frozenset[str] | None = None  # tools whose decision reads `args`; None: every tool
    agent_run_id: bool = True
    agent_id: bool = True  # the subject's own id (its grants and overrides are keyed anyway)

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
    return InputReads(args_of=args_of, agent_run_id=value.get("agent_run_id") is not False,
                      agent_id=value.get("agent_id") is not False or _names_agent_id(policies))


_COMMENT = re.compile(r"#.*$", re.M)
_DECLARATION = re.compile(r"^\s*input_reads\s*:?=.*$", re.M)


def _names_agent_id(policies: PolicySet) -> bool:
    """Whether any rule names `agent_id` (outside comments and the declaration itself): a
    module a governance admin adds that reads the agent's id, without changing the declaration,
    must not share one agent's decision with another."""
    for source in policies.modules.values():
        code = _DECLARATION.sub("", _COMMENT.sub("", source))
        if "agent_id" in code:
            return True
    return False
