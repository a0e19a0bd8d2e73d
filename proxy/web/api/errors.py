"""The native API routes' own errors (a run that exists or ended, an approval no longer pending,
a call no longer running); the generic ones are proxy/errors.py's."""

from __future__ import annotations

from proxy.errors import Conflict


class RunConflict(Conflict):
    """The run id is taken, or the run is completed already."""

    code = "run_exists"


class ApprovalNotPending(Conflict):
    code = "approval_not_pending"


class CallNotRunning(Conflict):
    code = "call_not_running"
