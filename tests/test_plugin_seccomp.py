"""The sandbox workers' seccomp filter: on in every live worker, what it denies and allows, the
`off` setting, and a worker that cannot install it refusing to serve (calls fail closed)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from services.plugins import pool as pool_module
from services.plugins import worker
from services.plugins.config import PluginSettings, SandboxLimits
from services.plugins.errors import PLUGIN_ERROR, PluginFailure, SandboxUnavailable
from services.plugins.pool import Job, WorkerPool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")

PROBE = Path(__file__).parent / "support" / "seccomp_probe.py"
JOB = Job(source="function invoke(a) { return { words: a.text.split(' ').length }; }",
          args={"text": "a sandbox that holds"}, context={})

# What the issue names as never allowed, whatever the filter's rules become.
NEVER = {"socket", "socketpair", "connect", "bind", "accept", "accept4", "listen", "sendto",
         "sendmsg", "recvfrom", "recvmsg", "execve", "execveat", "fork", "vfork", "clone",
         "clone3", "ptrace", "process_vm_readv", "process_vm_writev", "open", "openat", "openat2",
         "creat", "mount", "umount2", "chroot", "pivot_root", "unshare", "setns", "setuid",
         "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "kill", "tkill",
         "bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
         "prctl", "seccomp", "pkey_mprotect", "memfd_create", "userfaultfd", "keyctl"}


async def no_internal(_: object) -> dict[str, Any]:
    return {"ok": False, "code": "plugin_forbidden", "message": "none"}


def status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


@pytest.fixture
async def pool_of(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """pool_of(limits, python=...): a started pool, closed after the test."""
    pools: list[WorkerPool] = []

    async def start(limits: SandboxLimits, **kw: Any) -> WorkerPool:
        p = WorkerPool(2, limits, **kw)
        pools.append(p)
        await p.start()
        return p

    yield start
    for p in pools:
        await p.close()


@pytest.fixture
def no_libseccomp(tmp_path: Path) -> str:
    """An interpreter for the workers that finds a pyseccomp failing as the real one does when
    libseccomp.so.2 is absent (the wrapper drops -I so that PYTHONPATH is read)."""
    (tmp_path / "pyseccomp.py").write_text('raise RuntimeError("Unable to find libseccomp")\n')
    wrapper = tmp_path / "python-without-libseccomp"
    wrapper.write_text(f'#!/bin/sh\nshift\nPYTHONPATH={tmp_path} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


class Recorder:
    """Stands for the pool's structlog logger: what was logged, at which level."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        return lambda event, **kw: self.events.append((level, event, kw))


def probe(mode: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(PROBE), mode], check=False, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    (size,) = struct.unpack(">I", done.stdout[:4])
    return json.loads(done.stdout[4:4 + size])


# --- from outside: the live workers ------------------------------------------------------------


async def test_a_live_worker_runs_under_its_filter_with_no_new_privs(pool_of) -> None:
    pool = await pool_of(SandboxLimits())
    assert len(pool.pids()) == 2
    for pid in pool.pids():
        st = status(pid)
        assert (st["Seccomp"], st["NoNewPrivs"]) == ("2", "1"), st
    assert pool.seccomp is True
    result = await pool.run(JOB, deadline=time.time() + 5, on_internal=no_internal)
    assert result.output == {"words": 4}


async def test_with_seccomp_off_a_worker_has_no_filter(pool_of) -> None:
    pool = await pool_of(SandboxLimits(seccomp="off"))
    for pid in pool.pids():
        assert status(pid)["Seccomp"] == "0"
    assert pool.seccomp is False
    result = await pool.run(JOB, deadline=time.time() + 5, on_internal=no_internal)
    assert result.output == {"words": 4}


# --- from inside: the filter alone, in a probe process -----------------------------------------


def test_the_filter_denies_with_eperm_what_the_worker_never_needs() -> None:
    report = probe("filtered")
    refused = {name: result for name, result in report["denied"].items() if result != "EPERM"}
    assert refused == {}, refused
    # The list, as raw syscalls and through Python's own calls.
    assert {"socket", "connect", "bind", "execve", "execveat", "clone", "clone3", "ptrace",
            "process_vm_readv", "process_vm_writev", "open", "openat", "openat2", "mount",
            "chroot", "setuid", "setresuid", "kill", "tgkill", "bpf", "perf_event_open",
            "io_uring_setup", "py_socket", "py_fork", "py_execv", "py_open", "py_kill_init",
            "py_mmap_exec"} <= set(report["denied"])


def test_the_filter_allows_what_the_worker_does_and_quickjs_runs() -> None:
    report = probe("filtered")
    assert set(report["allowed"].values()) == {"ok"}, report["allowed"]
    assert report["quickjs"]["ok"] is True, report["quickjs"]
    assert report["quickjs"]["output"] == {"n": 4, "big": str(2 ** 100), "at": "number"}


@pytest.mark.skipif(os.geteuid() != 0, reason="unfiltered, some probes are EPERM for non-root")
def test_without_the_filter_no_probe_is_refused() -> None:
    # The control: each EPERM above is the filter's, not the kernel's answer to the arguments.
    report = probe("unfiltered")
    assert "EPERM" not in report["denied"].values(), report["denied"]
    assert report["quickjs"]["ok"] is True


def test_the_allowlist_names_none_of_the_forbidden_syscalls() -> None:
    import pyseccomp

    allowed = set(worker.PLAIN_SYSCALLS) | {name for name, _ in worker._conditional_rules(pyseccomp)}
    assert not allowed & NEVER, allowed & NEVER
    assert "tgkill" in allowed and "prlimit64" in allowed  # both only with conditions
    assert not {"tgkill", "prlimit64", "read", "write", "mmap", "mprotect"} & set(worker.PLAIN_SYSCALLS)


# --- a host that is not root: no chroot, the same filter and limits ----------------------------

NOBODY = 65534


@pytest.fixture
def as_nobody(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An interpreter for the workers that runs them as nobody, as `make up` by a normal user
    would; their sandbox directory is nobody's too, as a non-root host's own would be."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to start a worker as another user")
    wrapper = tmp_path / "python-as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups '
                       f'{sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    made = tempfile.mkdtemp

    def nobodys_dir(*args: Any, **kwargs: Any) -> str:
        path = made(*args, **kwargs)
        os.chown(path, NOBODY, NOBODY)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", nobodys_dir)
    return str(wrapper)


async def test_a_worker_of_an_unprivileged_host_is_locked_down_without_chroot(pool_of, as_nobody) -> None:
    pool = await pool_of(SandboxLimits(), python=as_nobody)
    assert pool.seccomp is True, pool.unavailable
    result = await pool.run(JOB, deadline=time.time() + 5, on_internal=no_internal)
    assert result.output == {"words": 4}
    hog = Job(source="function invoke(a) { let k = []; for (;;) k.push(new Array(100000).fill(7)); }",
              args={}, context={})
    with pytest.raises(PluginFailure) as failed:
        await pool.run(hog, deadline=time.time() + 10, on_internal=no_internal)
    assert failed.value.code == "plugin_memory"
    await pool.wait_full()
    for pid in pool.pids():
        st = status(pid)
        assert st["Uid"].split() == [str(NOBODY)] * 4
        assert (st["Seccomp"], st["NoNewPrivs"]) == ("2", "1")
        assert os.readlink(f"/proc/{pid}/root") == "/"  # not chrooted: a user cannot
        assert os.readlink(f"/proc/{pid}/cwd") == pool._root  # an empty directory of its own
        assert os.listdir(f"/proc/{pid}/fd") == ["0"]
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        assert next(l for l in limits if l.startswith("Max processes")).split()[2:4] == ["0", "0"]
        assert next(l for l in limits if l.startswith("Max open files")).split()[3:5] == ["1", "1"]
    assert os.listdir(pool._root) == []


# --- required, and a filter that cannot be had ---------------------------------------------------


async def test_required_without_libseccomp_the_workers_refuse_and_calls_fail_closed(
        pool_of, no_libseccomp, monkeypatch) -> None:
    logged = Recorder()
    monkeypatch.setattr(pool_module, "log", logged)
    pool = await pool_of(SandboxLimits(), python=no_libseccomp)  # the host keeps running
    assert pool.pids() == [] and pool.seccomp is False
    assert pool.unavailable == "libseccomp cannot be loaded: Unable to find libseccomp"
    errors = [(event, kw) for level, event, kw in logged.events if level == "error"]
    assert errors and {event for event, _ in errors} == {"sandbox_unavailable"}
    assert errors[0][1]["reason"] == pool.unavailable and errors[0][1]["seccomp"] == "required"
    t0 = time.perf_counter()
    with pytest.raises(PluginFailure) as failure:
        await pool.run(JOB, deadline=time.time() + 5, on_internal=no_internal)
    assert failure.value.code == PLUGIN_ERROR
    assert "sandbox is unavailable" in str(failure.value) and "libseccomp" in str(failure.value)
    assert time.perf_counter() - t0 < 1.0  # at once, not at the deadline


async def test_off_needs_no_libseccomp(pool_of, no_libseccomp) -> None:
    pool = await pool_of(SandboxLimits(seccomp="off"), python=no_libseccomp)
    assert len(pool.pids()) == 2 and pool.unavailable is None and pool.seccomp is False
    result = await pool.run(JOB, deadline=time.time() + 5, on_internal=no_internal)
    assert result.output == {"words": 4}


def test_a_ready_frame_without_the_filter_is_refused_when_required() -> None:
    required, off = WorkerPool(1, SandboxLimits()), WorkerPool(1, SandboxLimits(seccomp="off"))
    assert required._check_ready({"op": "ready", "seccomp": True}) is True
    with pytest.raises(SandboxUnavailable, match="did not report its syscall filter"):
        required._check_ready({"op": "ready"})
    with pytest.raises(SandboxUnavailable, match="no libseccomp here"):
        required._check_ready({"op": "refused", "code": "sandbox_unavailable",
                               "message": "no libseccomp here"})
    assert off._check_ready({"op": "ready", "seccomp": False}) is False


def test_the_setting_reaches_the_sandbox_limits(monkeypatch) -> None:
    monkeypatch.delenv("TOOLPROXY_PLUGIN_SECCOMP", raising=False)
    assert PluginSettings().limits().seccomp == "required"
    monkeypatch.setenv("TOOLPROXY_PLUGIN_SECCOMP", "off")
    assert PluginSettings().limits().seccomp == "off"
    monkeypatch.setenv("TOOLPROXY_PLUGIN_SECCOMP", "maybe")
    with pytest.raises(pydantic.ValidationError):
        PluginSettings()


def test_a_refused_syscall_during_a_call_is_a_stable_plugin_error() -> None:
    failure = worker._classify(PermissionError(1, "Operation not permitted"))
    assert (failure.code, failure.message) == ("plugin_error", "the sandbox refused an operation of the call")
