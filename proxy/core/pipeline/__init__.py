"""The invoke pipeline shared by every surface: a small conductor (Pipeline) and its stages —
prepared tools, listing, idempotency, decide, hold, admission, execute, ending, records. No
stage imports the conductor."""

from proxy.core.pipeline.conductor import Pipeline
from proxy.core.pipeline.execute import ForwardHook

__all__ = ["ForwardHook", "Pipeline"]
