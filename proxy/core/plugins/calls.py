"""This replica's running plugin calls: the identity, approval and deadline their internal()
calls inherit (looked up by call id; nothing the plugin host says is taken on trust). Kept up
to date by the pipeline's execute stage, as its ForwardHook."""

from __future__ import annotations

from dataclasses import dataclass

from proxy.core.call import Call


@dataclass(slots=True)
class RunningPluginCall:
    call: Call
    deadline: float  # epoch seconds
    internal_calls: int = 0


class PluginCalls:
    def __init__(self) -> None:
        self._calls: dict[str, RunningPluginCall] = {}

    def forwarding(self, call: Call, deadline: float) -> None:
        if call.manifest.plugin:
            self._calls[call.call_id] = RunningPluginCall(call, deadline)

    def done(self, call: Call) -> None:
        self._calls.pop(call.call_id, None)

    def get(self, call_id: str) -> RunningPluginCall | None:
        return self._calls.get(call_id)

    def __len__(self) -> int:
        return len(self._calls)
