"""PDP errors: every one of them ends as a denial (fail closed), never as an allow."""

from __future__ import annotations


class PdpError(Exception):
    code = "pdp_unavailable"


class EngineError(PdpError):
    """The engine raised, timed out or could not be reached."""


class PdpTimeout(EngineError):
    """The decision took longer than its budget."""


class PolicyUndefined(PdpError):
    """The policy produced no decision, or one that does not have the decision's shape."""

    code = "policy_undefined"


class PolicyInvalid(PdpError):
    """A policy did not compile; the previous revision keeps serving."""

    code = "policy_invalid"
