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


CATEGORIES: dict[str, CategorySpec] = {
    "A": CategorySpec("A", "safe", 2_000, 600, "low"),
    "B": CategorySpec("B", "controlled", 3_000, 120, "medium"),
    "C": CategorySpec("C", "sensitive", 5_000, 30, "high"),
    "D": CategorySpec("D", "critical", 10_000, 5, "critical"),
}
