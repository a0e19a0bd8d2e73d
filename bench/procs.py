"""CPU time and memory (PSS) of a stack's processes, read from /proc: each group is a child `up`
started and all of its descendants (proxy workers, Postgres backends)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # fields after the command name


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _pss(pid: int, rss: int) -> int:
    """Proportional set size (shared pages split between their users), else the RSS."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss


class Sampler:
    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups
        self._mark: dict[str, float] = {}
        self.peak_rss = 0
        self.peak_groups: dict[str, int] = {}  # each group's PSS in the sample of the peak

    @classmethod
    def of_stack(cls, stack) -> Sampler:  # type: ignore[no-untyped-def]
        return cls({c.name: c.pid for c in stack.children if c.pid})

    def cpu(self) -> dict[str, float]:
        """CPU seconds per group, the exited-and-waited-for children included."""
        out: dict[str, float] = {}
        groups: dict[str, int] = {}
        for name, root in self.groups.items():
            total = 0.0
            groups[name] = 0
            for pid in _descendants(root):
                f = _stat(pid)
                if f is None:
                    continue
                total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _TICK
                groups[name] += _pss(pid, int(f[21]) * _PAGE)
            out[name] = total
        if sum(groups.values()) > self.peak_rss:
            self.peak_rss, self.peak_groups = sum(groups.values()), groups
        return out

    def mark(self) -> None:
        self._mark = self.cpu()

    def since_mark(self) -> dict[str, float]:
        now = self.cpu()
        return {k: now[k] - self._mark.get(k, 0.0) for k in now}

    def rss_mb(self) -> float:
        self.cpu()
        return self.peak_rss / (1 << 20)

    @contextlib.asynccontextmanager
    async def sampling(self, every_s: float = 1.0) -> AsyncIterator[None]:
        """Memory sampled while the body runs (a load's peak, not an idle snapshot): the
        largest total PSS seen is kept in `peak_rss`."""
        async def loop() -> None:
            while True:
                await asyncio.to_thread(self.cpu)
                await asyncio.sleep(every_s)

        task = asyncio.ensure_future(loop())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
