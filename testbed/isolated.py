"""Run a function in a forked child that first enters another network
namespace: a fresh anonymous one (run_isolated), a named testbed one
(run_in_netns), or a private sandbox with its own /run/netns (run_sandboxed).

A fresh namespace has no name and holds only what the function makes; it
vanishes when the child exits, however it exits (even kill -9). Children
restore default SIGINT/SIGTERM handling so that no parent teardown handler
runs in them.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
NETNS_RUN_DIR = "/run/netns"

_libc = ctypes.CDLL(None, use_errno=True)


class IsolatedError(RuntimeError):
    """The child raised, crashed or ran out of time. str() is one line; the
    child's traceback is in .details."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter_fresh_netns() -> None:
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")


def enter_netns(name: str) -> None:
    """setns into /run/netns/<name>, then prove it worked: anything done
    after this must never land in the namespace we came from."""
    path = os.path.join(NETNS_RUN_DIR, name)
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns({name})")
    finally:
        os.close(fd)
    if os.stat("/proc/self/ns/net").st_ino != os.stat(path).st_ino:
        raise OSError(f"setns({name}) did not take effect")


def mount_own_sysfs() -> None:
    """A private mount namespace with a sysfs of the current network
    namespace on /sys (sysfs shows the devices of the namespace that
    mounted it): what `ip netns exec` does, for this process only."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(_libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs on /sys")


def enter_sandbox() -> None:
    """A private network namespace (holding only lo, brought up) and a
    private mount namespace with its own tmpfs on /run/netns: named
    namespaces made inside are invisible outside and vanish with it."""
    _check(_libc.unshare(CLONE_NEWNET | CLONE_NEWNS), "unshare(CLONE_NEWNET|CLONE_NEWNS)")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    os.makedirs(NETNS_RUN_DIR, exist_ok=True)
    _check(_libc.mount(b"prc-sandbox", NETNS_RUN_DIR.encode(), b"tmpfs", 0, b"mode=0755"),
           f"mount tmpfs on {NETNS_RUN_DIR}")
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


class Child:
    """A forked child running enter(*enter_args) then fn(*args); collect its
    (picklable) return value with result()."""

    def __init__(self, enter, enter_args, fn, args):
        self._read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._read_fd)
            self._child_main(write_fd, enter, enter_args, fn, args)
        os.close(write_fd)
        self._done = False

    @staticmethod
    def _child_main(write_fd, enter, enter_args, fn, args):
        status = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            enter(*enter_args)
            payload = pickle.dumps(("ok", fn(*args)))
        except BaseException as exc:  # report everything, SystemExit included
            payload = pickle.dumps(("error", (f"{type(exc).__name__}: {exc}", traceback.format_exc())))
            status = 1
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        finally:
            os._exit(status)

    def result(self, timeout_s: float = 60.0):
        if self._done:
            raise RuntimeError("result() already collected")
        self._done = True
        try:
            data = self._read_all(timeout_s)
        finally:
            os.close(self._read_fd)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        if not data:
            raise IsolatedError("child died without a result")
        kind, value = pickle.loads(data)
        if kind != "ok":
            raise IsolatedError(*value)
        return value

    def _read_all(self, timeout_s: float) -> bytes:
        chunks = []
        deadline = time.monotonic() + timeout_s
        while True:
            ready, _, _ = select.select([self._read_fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(self.pid, signal.SIGKILL)
                raise IsolatedError(f"child ran over {timeout_s:.0f} s and was killed")
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def run_isolated(fn, *args, timeout_s: float = 60.0):
    """fn(*args) in a fresh anonymous network namespace; its result."""
    return Child(enter_fresh_netns, (), fn, args).result(timeout_s)


def start_in_netns(name: str, fn, *args) -> Child:
    """Start fn(*args) inside the named namespace; collect with .result()."""
    return Child(enter_netns, (name,), fn, args)


def run_in_netns(name: str, fn, *args, timeout_s: float = 60.0):
    return start_in_netns(name, fn, *args).result(timeout_s)


def run_sandboxed(fn, *args, timeout_s: float = 600.0):
    """fn(*args) inside a private network + mount namespace (enter_sandbox)."""
    return Child(enter_sandbox, (), fn, args).result(timeout_s)
