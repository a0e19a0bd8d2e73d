"""Started in place of a stdio upstream's program: sets its limits, its own working directory,
no new privileges, an unprivileged user when started as root, optionally no network, and an
environment of exactly its declared variables; then becomes the program (execve).

Run as a script (`python -I -S confine.py`), importing nothing of the project: it runs before
the program, in the child, and its spec arrives in TOOLPROXY_CONFINE (JSON), which the program
never sees."""

import ctypes
import json
import os
import resource
import sys

PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNET = 0x40000000


def main() -> None:
    spec = json.loads(os.environ["TOOLPROXY_CONFINE"])
    libc = ctypes.CDLL(None, use_errno=True)
    mem = spec["memory_bytes"]
    limits = [(resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, spec["cpu_s"]),
              (resource.RLIMIT_NOFILE, spec["nofile"]), (resource.RLIMIT_NPROC, spec["nproc"]),
              (resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, spec["fsize_bytes"])]
    for which, value in limits:
        resource.setrlimit(which, (value, value))
    # Fail closed: a server meant to have no network does not start where none can be taken away.
    if spec.get("no_network") and libc.unshare(CLONE_NEWNET) != 0:
        sys.exit(f"confine: no network namespace: errno {ctypes.get_errno()}")
    os.chdir(spec["cwd"])
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit(f"confine: no_new_privs refused: errno {ctypes.get_errno()}")
    os.execve(spec["executable"], [spec["executable"], *spec["argv"]], spec["env"])


if __name__ == "__main__":
    main()
