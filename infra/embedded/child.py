"""A supervised child process: its own process group, dies with its parent, stopped by PID."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child after setuid (CPython calls preexec_fn last), so the setting survives.
    # If the supervisor is SIGKILLed, the kernel sends SIGTERM to this child: no orphans.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Child:
    """One child process started by us; `stop()` ends it (and only it) by its PID."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
        user: int | None = None,
        group: int | None = None,
        stop_signal: int = signal.SIGTERM,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.user = user
        self.group = group
        self.stop_signal = stop_signal
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        if self.user is not None:
            os.chown(self.log_path, self.user, self.group if self.group is not None else -1)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                user=self.user,
                group=self.group,
                extra_groups=[] if self.user is not None else None,
                process_group=0,  # a terminal's Ctrl-C reaches the supervisor only
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        """None while running."""
        return self.proc.poll() if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> int | None:
        """Signal the child, wait up to `timeout`, then SIGKILL it. Returns its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(self.stop_signal)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode
