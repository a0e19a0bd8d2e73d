"""Short pauses from the garbage collector in long-lived processes: what start-up allocated is
frozen out of the collector's sight."""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect once, then move every surviving object to the permanent generation: a full
    collection later walks only what was allocated since. (A process holding a million objects
    — web3, py-evm, the catalog — otherwise pauses its event loop for a second or more on each
    full collection, longer than the timeouts its calls are allowed.)"""
    gc.collect()
    gc.freeze()
