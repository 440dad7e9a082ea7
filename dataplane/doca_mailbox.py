"""The PRC mailbox to DOCA PCC device code (bpf/doca/prc_mailbox.h): the
message format, the actuator the controller writes through on a
BlueField-3 (the same set(proc, weight, floor) as the emulator's hook
map), and the device-side C built for the host, which tests and the host
harness drive."""
from __future__ import annotations

import ctypes
import struct
from typing import Callable

from dataplane.bpf_build import BPF_DIR
from dataplane.cc import Hook, hook
from dataplane.host_lib import build_shared_library

MAGIC = 0x4D435250            # "PRCM" little-endian
VERSION = 1
HEADER = struct.Struct("<IHHI")         # magic, version, count, seq
ENTRY = struct.Struct("<IIII")          # proc, weight, rate_floor, rate_cap
MAX_ENTRIES = 64
PROCS = 256
DOCA_DIR = BPF_DIR / "doca"
STATUS = ("ok", "short", "bad magic", "bad version", "bad length", "stale", "bad process", "bad value")


def encode(seq: int, hooks: dict[int, Hook], version: int = VERSION) -> bytes:
    """One message setting each process's hook, numbered seq."""
    if len(hooks) > MAX_ENTRIES:
        raise ValueError(f"at most {MAX_ENTRIES} processes per message, got {len(hooks)}")
    return HEADER.pack(MAGIC, version, len(hooks), seq & 0xFFFFFFFF) + b"".join(
        ENTRY.pack(proc, h.weight, h.rate_floor, h.rate_cap) for proc, h in hooks.items())


class MailboxRejected(RuntimeError):
    """The device refused a message (its error counter moved on)."""


class MailboxHooks:
    """The controller's actuator over the mailbox: each set() is one
    message, numbered on from the last. send(message) delivers it and
    returns the device's status: with the SDK, a doca_pcc_mailbox_send
    of the request buffer (docs/doca-port.md); in tests, DeviceMailbox."""

    def __init__(self, send: Callable[[bytes], int], first_seq: int = 1):
        self.send, self.seq = send, first_seq - 1

    def set(self, proc: int, weight: float = 1.0, floor_frac: float = 0.0, cap_frac: float = 0.0) -> None:
        self.seq += 1
        status = self.send(encode(self.seq, {proc: hook(weight, floor_frac, cap_frac)}))
        if status:
            raise MailboxRejected(f"message {self.seq} for process {proc}: {STATUS[status]}")


class MailboxState(ctypes.Structure):
    """struct prc_mailbox_state."""

    _fields_ = [("last_seq", ctypes.c_uint32), ("taken", ctypes.c_uint32), ("errors", ctypes.c_uint32),
                ("last_error", ctypes.c_uint32), ("hooks", Hook * PROCS)]


class DeviceMailbox:
    """The device side's mailbox logic, compiled for the host."""

    def __init__(self):
        path = build_shared_library("prcmailbox", [DOCA_DIR / "mailbox_host.c"],
                                    [DOCA_DIR / "prc_mailbox.h", *(BPF_DIR / "cc").glob("*.h")])
        self.lib = ctypes.CDLL(str(path))
        self.lib.prc_mailbox_handle.argtypes = [ctypes.POINTER(MailboxState), ctypes.c_char_p, ctypes.c_uint]
        self.lib.prc_mailbox_handle.restype = ctypes.c_int
        self.lib.prc_mailbox_state_size.restype = ctypes.c_size_t
        self.state = MailboxState()

    def handle(self, message: bytes) -> int:
        """What doca_pcc_dev_user_mailbox_handle does with a request: the status."""
        return self.lib.prc_mailbox_handle(ctypes.byref(self.state), message, len(message))

    def hook(self, proc: int) -> Hook:
        return Hook.from_buffer_copy(self.state.hooks[proc])
