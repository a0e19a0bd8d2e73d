"""The turn routes' typed errors (stable codes)."""

from __future__ import annotations

from proxy.errors import ApiError, Conflict


class TurnNotHeld(Conflict):
    code = "turn_not_held"


class TurnNotRunning(Conflict):
    code = "turn_not_running"


class RunCompleted(Conflict):
    code = "run_completed"


class ModelNotConfigured(ApiError):
    code = "model_not_configured"
    http_status = 503
