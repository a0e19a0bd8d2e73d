"""Log context: ids bound for a request or a block (call ids in every log line of a call), kept
in one context variable and merged into each log line by `merge` (a structlog processor).

structlog's own contextvars keep one context variable per key: binding five keys sets five
variables, undoing them resets five, and every log line walks the whole context to find them.
Here a binding is one new mapping set once (and reset once), and costs the same for any
number of keys. structlog's `bind_contextvars` still works beside it (both are merged)."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, MutableMapping
from types import MappingProxyType, TracebackType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_BOUND: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "toolproxy_log_context", default=_EMPTY)


def start(**kw: Any) -> None:
    """A request's context from scratch (in its own task: nothing to undo)."""
    _BOUND.set(kw)


def add(**kw: Any) -> None:
    """More keys for the rest of the current task (a later value replaces an earlier one)."""
    _BOUND.set({**_BOUND.get(), **kw})


def current() -> Mapping[str, Any]:
    return _BOUND.get()


class bound:  # noqa: N801 - used like the context manager function it replaces
    """`with bound(call_id=...):` the keys are in every log line of the block, then the context
    is what it was before."""

    __slots__ = ("_kw", "_token")

    def __init__(self, **kw: Any) -> None:
        self._kw = kw
        self._token: contextvars.Token[Mapping[str, Any]] | None = None

    def __enter__(self) -> None:
        self._token = _BOUND.set({**_BOUND.get(), **self._kw})

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            _BOUND.reset(self._token)
            self._token = None


def merge(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The structlog processor: the bound keys first, the line's own keys over them."""
    ctx = _BOUND.get()
    if not ctx:
        return event
    return {**ctx, **event}
