"""The `toolproxy` command run as a subprocess, as a user runs it, with the test token secret."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.support.settings import TEST_SECRET


async def cli(*args: str, data_dir: Path | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    env["TOOLPROXY_JWT_SECRET"] = TEST_SECRET
    if data_dir is not None:
        env["TOOLPROXY_DATA_DIR"] = str(data_dir)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
