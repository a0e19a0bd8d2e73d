"""What a service's worker processes run before its calls: a watch on their parent and a module
warmed ahead. Light on purpose: a spawned worker imports this module, not the SDK."""

from __future__ import annotations

import importlib
import os
import threading
import time


def watch_parent(parent: int) -> None:
    """In a worker process: exit as soon as the service's process is gone, even killed (a
    process pool's workers otherwise outlive a parent that could not shut them down)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def warm(module: str) -> None:
    """In a worker process: import a handler's module before the first call needs it."""
    importlib.import_module(module)
