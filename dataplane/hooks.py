"""The per-process PRC hook map (proc_hook in bpf/nic.c) written through
mmap: a controller in this process or another writes a process's weight,
floor and cap with plain stores instead of a bpf() syscall per update
(`make bench`: about 0.2 us against 2.2 us from Python). The map's id is in the run record (`maps.proc_hook`).

Each 32-bit field is one store; nic_tx and nic_rx copy a hook out before
using it, so a packet may see a new weight with the old floor, never a
half-written field. A write takes effect at each of the process's QPs'
next event, which also applies it to the timer steps of the silence
before it (docs/cc.md)."""
from __future__ import annotations

import ctypes
import os

from dataplane.bpf_mmap import MmapArray
from dataplane.bpf_objects import map_fd_by_id
from dataplane.cc import Hook, hook
from dataplane.nic import MAX_PROCS


class HookMap:
    def __init__(self, view: MmapArray):
        self._view = view

    @classmethod
    def of_table(cls, table) -> "HookMap":
        """From the BCC table of a Nic in this process."""
        return cls(MmapArray(table, Hook))

    @classmethod
    def by_id(cls, map_id: int) -> "HookMap":
        """From the map's id (another process loaded the NIC)."""
        fd = map_fd_by_id(map_id)
        try:
            return cls(MmapArray(None, Hook, fd, MAX_PROCS))
        finally:
            os.close(fd)            # the mapping keeps the map alive

    def _entry(self, proc: int) -> Hook:
        if not 0 <= proc < MAX_PROCS:
            raise ValueError(f"process must be 0..{MAX_PROCS - 1}, got {proc}")
        return self._view[proc]

    def write(self, proc: int, value: Hook) -> None:
        entry = self._entry(proc)
        entry.weight, entry.rate_floor, entry.rate_cap = value.weight, value.rate_floor, value.rate_cap

    def set(self, proc: int, weight: float = 1.0, floor_frac: float = 0.0, cap_frac: float = 0.0) -> None:
        """A weight, and a floor and cap as fractions of line rate (0: none)."""
        self.write(proc, hook(weight, floor_frac, cap_frac))

    def weight_address(self, proc: int) -> int:
        """Where proc's weight lives, for C readers (the TX engine's port
        arbiter); valid while the map is mapped."""
        return ctypes.addressof(self._entry(proc)) + Hook.weight.offset

    def read(self, proc: int) -> Hook:
        return Hook.from_buffer_copy(self._view[proc])

    def close(self) -> None:
        self._view.close()
