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
    """Its steps are llm.chat calls: where no service serves llm.chat (no TOOLPROXY_LLM_BASE_URL),
    this stack offers no model agent. A 4xx: asking again cannot help until an operator
    configures one (a 503 told clients to retry for nothing)."""

    code = "model_not_configured"
    http_status = 400
