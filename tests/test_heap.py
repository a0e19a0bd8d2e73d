"""The collector's settings in long-lived processes (infra.gc_tuning)."""

from __future__ import annotations

import gc

from infra.gc_tuning import GEN0_THRESHOLD, freeze_startup_objects


def test_startup_objects_are_frozen_and_the_youngest_generation_waits_longer() -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        frozen = gc.get_freeze_count()
        kept = [[i] for i in range(1000)]  # lists are always tracked; they survive: frozen
        freeze_startup_objects()
        assert gc.get_freeze_count() - frozen >= len(kept)
        assert gc.get_threshold() == (GEN0_THRESHOLD, before[1], before[2])
    finally:
        gc.set_threshold(*before)


def test_a_burst_of_live_young_objects_costs_no_collection() -> None:
    """5,000 containers alive at once (a worker's requests in flight) trigger no collection of
    the youngest generation, where CPython's default of 700 would collect about seven times."""
    before = gc.get_threshold()
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    freeze_startup_objects()
    gc.callbacks.append(seen)
    try:
        burst = [[i] for i in range(5000)]
        assert len(burst) == 5000
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*before)
    assert collections == []
