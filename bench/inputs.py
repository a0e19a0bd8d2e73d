"""What the input rules cost per request (run by hand: python bench/inputs.py).

The boundary work a native call does before anything else: parsing the envelope with the
strict model, and the text scan for NUL escapes and suspicious numbers (proxy/core/input_rules.py),
for a typical envelope, a 100 KiB one and a 1 MiB one; and the walk a suspicious body gets.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.core.envelope import InvokeRequest  # noqa: E402
from proxy.core.input_rules import json_text_problem  # noqa: E402


def per_call_us(fn, data: bytes, rounds: int) -> tuple[float, float]:
    """(fastest, median) in µs: the fastest is the cost itself on a shared, loaded host."""
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(data)
        samples.append((time.perf_counter() - t) * 1e6)
    return min(samples), statistics.median(samples)


def body(text: str, extra: str = "") -> bytes:
    return orjson.dumps({"tool": "text", "args": {"op": "upper", "text": text},
                         "context": {"team_id": "team-1", "agent_run_id": "ar_123"},
                         "idempotency_key": "k-123"})[:-1] + extra.encode() + b"}"


def main() -> None:
    words = "the proxy checks every call 42 times before noon; "
    cases = {
        "typical (~150 B)": body("hello world"),
        "100 KiB text": body(words * (100_000 // len(words))),
        "1 MiB text": body(words * (1_000_000 // len(words))),
        "100 KiB, suspicious (19 digits)": body(words * (100_000 // len(words)) + " 1234567890123456789"),
    }
    print(f"{'body':34} {'bytes':>9} {'parse min/p50 us':>18} {'scan min/p50 us':>18}")
    for name, data in cases.items():
        rounds = 2000 if len(data) < 10_000 else 200
        p_min, p_med = per_call_us(InvokeRequest.model_validate_json, data, rounds)
        s_min, s_med = per_call_us(json_text_problem, data, rounds)
        print(f"{name:34} {len(data):>9} {p_min:>8.1f} / {p_med:<8.1f} {s_min:>8.1f} / {s_med:<8.1f}")


if __name__ == "__main__":
    main()
