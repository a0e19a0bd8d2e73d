"""Run as a script: installs the sandbox worker's syscall filter alone, tries what it must deny
and what it must allow, and prints the outcomes as JSON (errno names, "ok" when it worked).

`python tests/support/seccomp_probe.py filtered|unfiltered`: `unfiltered` tries the same without the
filter, to show that each refusal comes from the filter and not from the call's arguments.
The filter alone (no chroot, no rlimits), so only it can refuse; harmless arguments, so that
what the kernel would otherwise do is an error other than EPERM, or a no-op.
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import resource
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyseccomp  # noqa: E402

from services.plugins import worker  # noqa: E402

LIBC = ctypes.CDLL(None, use_errno=True)
SYSCALL = LIBC.syscall
SYSCALL.restype = ctypes.c_long
SYSCALL.argtypes = [ctypes.c_long] * 7
PPID = os.getppid()
PID = os.getpid()
FUTEX_WAKE_PRIVATE, FUTEX_LOCK_PI = 129, 6
WORD = ctypes.c_int(0)

# name -> arguments: each would be an error other than EPERM (EBADF, EFAULT, EINVAL...) or a
# harmless success for root without the filter. fork and vfork are tried apart (they succeed).
DENIED: dict[str, tuple[int, ...]] = {
    "socket": (socket.AF_INET, socket.SOCK_STREAM, 0),
    "socketpair": (socket.AF_UNIX, socket.SOCK_STREAM, 0, 0),
    "connect": (-1, 0, 0),
    "bind": (-1, 0, 0),
    "sendmsg": (0, 0, 0),
    "recvmsg": (0, 0, 0),
    "execve": (0, 0, 0),
    "execveat": (-1, 0, 0, 0, 0),
    "clone": (0x800, 0, 0, 0, 0),  # CLONE_SIGHAND without CLONE_VM: EINVAL
    "clone3": (0, 0),
    "ptrace": (-1, 0, 0, 0),
    "process_vm_readv": (PPID, 0, 0, 0, 0, 0),
    "process_vm_writev": (PPID, 0, 0, 0, 0, 0),
    "open": (0, 0, 0),
    "openat": (-1, 0, 0, 0),
    "openat2": (-1, 0, 0, 0),
    "mount": (0, 0, 0, 0, 0),
    "umount2": (0, 0),
    "chroot": (0,),
    "unshare": (0,),
    "setuid": (-1,),
    "setresuid": (-1, -1, -1),
    "setgid": (-1,),
    "setgroups": (-1, 0),
    "kill": (PPID, 0),
    "tkill": (PPID, 0),
    "tgkill": (PPID, PPID, 0),
    "bpf": (-1, 0, 0),
    "perf_event_open": (0, 0, -1, -1, 0),
    "io_uring_setup": (0, 0),
    "io_uring_enter": (-1, 0, 0, 0, 0, 0),
    "io_uring_register": (-1, 0, 0, 0),
    "prctl": (3, 0, 0, 0, 0),  # PR_GET_DUMPABLE
    "seccomp": (1, 0, 0),  # SECCOMP_SET_MODE_FILTER without a program: EFAULT
    "mprotect": (0, 0, mmap.PROT_READ | mmap.PROT_EXEC),  # a no-op but for PROT_EXEC
    "write": (1, 0, 0),  # only fd 0
    "read": (1, 0, 0),
    "getrusage": (resource.RUSAGE_CHILDREN, 0),
    "prlimit64": (PPID, resource.RLIMIT_CPU, 0, 0),  # another process's limits
    "futex": (0, FUTEX_LOCK_PI, 0, 0, 0, 0),  # a PI operation
}


def outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "ok"


def raw(number: int, args: tuple[int, ...]) -> Callable[[], None]:
    def call() -> None:
        if SYSCALL(number, *args, *[0] * (6 - len(args))) == -1:
            raise OSError(ctypes.get_errno(), "")

    return call


def forked() -> None:
    if os.fork() == 0:
        os._exit(0)  # unfiltered: the child leaves at once


def python_level(filtered: bool) -> dict[str, Callable[[], Any]]:
    """The same refusals through Python's own calls (PermissionError expected)."""
    execv = {"py_execv": lambda: os.execv("/bin/true", ["true"])} if filtered else {}
    return {
        **execv,  # unfiltered, it would replace the probe
        "py_socket": lambda: socket.socket(),
        "py_fork": forked,
        "py_open": lambda: open("/etc/hostname", "rb"),
        "py_kill_init": lambda: os.kill(1, 0),
        "py_mmap_exec": lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC),
        "py_getrlimit_nofile": lambda: resource.getrlimit(resource.RLIMIT_NOFILE),
        "py_prlimit_parent": lambda: resource.prlimit(PPID, resource.RLIMIT_CPU),
    }


def allowed() -> dict[str, Callable[[], Any]]:
    """What the worker does after lockdown: must still work under the filter."""
    cpu = resource.getrlimit(resource.RLIMIT_CPU)
    return {
        "getrlimit_cpu": lambda: resource.getrlimit(resource.RLIMIT_CPU),
        "setrlimit_cpu": lambda: resource.setrlimit(resource.RLIMIT_CPU, cpu),
        "getrusage_self": lambda: resource.getrusage(resource.RUSAGE_SELF),
        "process_time": time.process_time,
        "getpid": os.getpid,
        "tgkill_self_signal_0": raw(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "tgkill"),
                                    (PID, PID, 0)),
        "futex_wake_private": raw(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "futex"),
                                  (ctypes.addressof(WORD), FUTEX_WAKE_PRIVATE, 1)),
        "big_allocation": lambda: bytearray(64 << 20),
    }


QUICKJS_JOB = {
    "source": "function invoke(a) { const w = a.text.split(' '); "
              "return { n: w.length, big: (2n ** 100n).toString(), at: typeof Date.now() }; }",
    "args": json.dumps({"text": "a sandbox that holds"}), "context": "{}", "internal": False,
    "limits": {"cpu_s": 2.0, "memory_bytes": 16 << 20, "stack_bytes": 256 << 10,
               "max_output_chars": 1 << 20},
}


def main() -> None:
    filtered = sys.argv[1] == "filtered"
    numbers = {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in DENIED}
    probes = {name: raw(numbers[name], args) for name, args in DENIED.items()}
    probes.update(python_level(filtered))
    checks = allowed()
    os.dup2(1, worker.FD)  # the report goes out on fd 0, the only fd the filter lets it write
    if filtered:
        worker.install_filter(worker.build_filter())
    report = {
        "denied": {name: outcome(call) for name, call in probes.items()},
        "allowed": {name: outcome(call) for name, call in checks.items()},
        "quickjs": worker.run(QUICKJS_JOB),
    }
    worker.send(report)


if __name__ == "__main__":
    main()
