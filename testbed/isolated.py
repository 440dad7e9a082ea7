"""Run a function in a child process inside a fresh, anonymous network
namespace.

The namespace has no name and holds only what the function makes; it
vanishes when the child exits, however it exits (even kill -9), so quick
platform probes and demos can create veths, qdiscs and XDP programs
without any chance of touching the machine's own network or leaking.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import time
import traceback

CLONE_NEWNET = 0x40000000


class IsolatedError(RuntimeError):
    """The isolated function raised, crashed or ran out of time."""


def _unshare_net() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")


def run_isolated(fn, *args, timeout_s: float = 60.0):
    """Call fn(*args) in a forked child inside a new network namespace and
    return its (picklable) result; raise IsolatedError with the child's
    error text if it fails or does not finish within timeout_s."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the caller's code
        os.close(read_fd)
        status = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _unshare_net()
            payload = pickle.dumps(("ok", fn(*args)))
        except BaseException as exc:  # report everything, including SystemExit
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
            status = 1
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(status)

    os.close(write_fd)
    try:
        data = _read_all(read_fd, pid, timeout_s)
    finally:
        os.close(read_fd)
        _reap(pid)
    if not data:
        raise IsolatedError("isolated child died without a result")
    kind, value = pickle.loads(data)
    if kind != "ok":
        raise IsolatedError(value.splitlines()[0] if value else "isolated child failed")
    return value


def _read_all(fd: int, pid: int, timeout_s: float) -> bytes:
    chunks = []
    deadline = time.monotonic() + timeout_s
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            raise IsolatedError(f"isolated child ran over {timeout_s:.0f} s and was killed")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
