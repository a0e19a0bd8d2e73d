"""Tool categories A (safe) to D (critical): their default timeouts and rate classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Category = Literal["A", "B", "C", "D"]
Action = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class CategorySpec:
    name: Category
    label: str
    timeout_ms: int  # the default deadline, also the most a tool of this category may ask for
    rate_per_minute: int  # default per agent and tool; the limits issue makes this shared
    default_risk: str
    # The most bytes of arguments (compact JSON) a tool takes when its input schema does not
    # bound them itself (a bounded schema's own bound applies; see wire/bounds.py).
    max_args_bytes: int


CATEGORIES: dict[str, CategorySpec] = {
    "A": CategorySpec("A", "safe", 2_000, 600, "low", 64 << 10),
    "B": CategorySpec("B", "controlled", 3_000, 120, "medium", 256 << 10),
    "C": CategorySpec("C", "sensitive", 5_000, 30, "high", 256 << 10),
    "D": CategorySpec("D", "critical", 10_000, 5, "critical", 64 << 10),
}
