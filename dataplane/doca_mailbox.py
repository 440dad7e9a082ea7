"""The PRC mailbox to DOCA PCC device code (bpf/doca/prc_mailbox.h): the
message format and the actuator the controller writes through on a
BlueField-3, with the same set(proc, weight, floor) as the emulator's
hook map, plus bind(qpn, proc), which tells the device whose QP is whose."""
from __future__ import annotations

import struct
from typing import Callable

from dataplane.cc import Hook, hook

MAGIC = 0x4D435250            # "PRCM" little-endian
VERSION = 2
HOOKS, BINDINGS = 1, 2        # message kinds
HEADER = struct.Struct("<IHHHHI")       # magic, version, kind, count, zero, seq
HOOK_ENTRY = struct.Struct("<IIII")     # proc, weight, rate_floor, rate_cap
BINDING_ENTRY = struct.Struct("<II")    # qpn, proc (NO_PROC: unbind)
MAX_ENTRIES = 64
PROCS = 256
NO_PROC = 0xFFFFFFFF
STATUS = ("ok", "short", "bad magic", "bad version", "bad length", "stale", "bad process", "bad value",
          "bad kind", "bad QPN", "QP table full")


def _message(kind: int, seq: int, entries: list[bytes], version: int) -> bytes:
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"at most {MAX_ENTRIES} entries per message, got {len(entries)}")
    return HEADER.pack(MAGIC, version, kind, len(entries), 0, seq & 0xFFFFFFFF) + b"".join(entries)


def encode(seq: int, hooks: dict[int, Hook], version: int = VERSION) -> bytes:
    """One message setting each process's hook, numbered seq."""
    return _message(HOOKS, seq, [HOOK_ENTRY.pack(proc, h.weight, h.rate_floor, h.rate_cap)
                                 for proc, h in hooks.items()], version)


def encode_bindings(seq: int, bindings: dict[int, int | None], version: int = VERSION) -> bytes:
    """One message binding each QPN to a process (None: unbind it)."""
    return _message(BINDINGS, seq, [BINDING_ENTRY.pack(qpn, NO_PROC if proc is None else proc)
                                    for qpn, proc in bindings.items()], version)


class MailboxRejected(RuntimeError):
    """The device refused a message (its error counter moved on)."""


class MailboxHooks:
    """The controller's actuator over the mailbox: each set() or bind() is
    one message, numbered on from the last. send(message) delivers it and
    returns the device's status: with the SDK, a doca_pcc_mailbox_send of
    the request buffer (docs/doca-port.md); in tests and the harness,
    dataplane.doca_device.DocaDevice.mailbox."""

    def __init__(self, send: Callable[[bytes], int], first_seq: int = 1):
        self.send, self.seq = send, first_seq - 1

    def _deliver(self, message_for: Callable[[int], bytes], what: str) -> None:
        self.seq += 1
        status = self.send(message_for(self.seq))
        if status:
            raise MailboxRejected(f"message {self.seq} ({what}): {STATUS[status]}")

    def set(self, proc: int, weight: float = 1.0, floor_frac: float = 0.0, cap_frac: float = 0.0) -> None:
        self._deliver(lambda seq: encode(seq, {proc: hook(weight, floor_frac, cap_frac)}), f"process {proc}")

    def set_hook(self, proc: int, hk: Hook) -> None:
        """A hook as the core takes it (fixed point), as Nic.set_hook."""
        self._deliver(lambda seq: encode(seq, {proc: hk}), f"process {proc}")

    def bind(self, bindings: dict[int, int | None]) -> None:
        self._deliver(lambda seq: encode_bindings(seq, bindings), f"{len(bindings)} bindings")
