"""`toolproxy up` run as a user runs it: the subprocess (always stopped by its own PID), the
command's other verbs on the same data directory, and a POST to the API it serves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

TOOLPROXY = [sys.executable, "-m", "cli.main"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}


def post(url: str, body: dict, token: str) -> tuple[int, dict]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Up:
    """One `toolproxy up` subprocess; always stopped by its own PID."""

    def __init__(self, data_dir: Path, port: int, *more: str) -> None:
        self.data_dir = data_dir
        self.port = port
        self.proc = subprocess.Popen(
            [*TOOLPROXY, "up", "--port", str(port), "--data-dir", str(data_dir), *more],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        )
        self.lines: list[str] = []

    def wait_ready(self, timeout: float = 90.0) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip())
            if line.startswith("toolproxy ready at "):
                return line.split(" at ", 1)[1].strip()
        raise AssertionError(f"not ready: {self.lines} / {self.stderr()}")

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def runtime(self) -> dict:
        return json.loads((self.data_dir / "runtime.json").read_text())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def cli(*args: str, data_dir: Path) -> str:
    out = subprocess.run([*TOOLPROXY, *args, "--data-dir", str(data_dir)], capture_output=True,
                         text=True, env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()
