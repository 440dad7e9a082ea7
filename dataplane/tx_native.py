"""The TX engine's send loop and scheduler in C (bpf/engine/): ctypes
mirrors of its structs and the loaded library. Python, one packet at a
time, left the engine at half the packet rate of a bare send loop; frame
patching, departure waits, logging and the choice of the next QP run in C,
which returns to Python for completions and time slices only."""
from __future__ import annotations

import ctypes
import functools

from dataplane.bpf_build import BPF_DIR
from dataplane.host_lib import build_shared_library

ENGINE_DIR = BPF_DIR / "engine"
PSN_BITS = 24
u64p = ctypes.POINTER(ctypes.c_uint64)
# enum tx_status (dataplane/layout.py checks each value against C)
TX_STATUS_NAMES = ("TX_MESSAGE_DONE", "TX_WAIT", "TX_PAUSED", "TX_NO_CREDIT", "TX_LOG_FULL", "TX_IDLE", "TX_END",
                   "TX_NAK", "TX_EVENT")
TX_MESSAGE_DONE, TX_WAIT, TX_PAUSED, TX_NO_CREDIT, TX_LOG_FULL, TX_IDLE, TX_END, TX_NAK, TX_EVENT = \
    range(len(TX_STATUS_NAMES))


class TxFrame(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_void_p), ("len", ctypes.c_uint32), ("psn_at", ctypes.c_uint32),
                ("payload", ctypes.c_uint32), ("icrc_base", ctypes.c_uint32),
                ("psn_delta", ctypes.c_uint32 * PSN_BITS)]


class TxCredit(ctypes.Structure):
    _fields_ = [("budget", ctypes.c_uint64), ("sent", ctypes.c_uint64),
                ("rx", ctypes.POINTER(u64p)), ("n_rx", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class TxPort(ctypes.Structure):
    pass            # fields below TxQp, which they point to


class TxQp(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int32), ("next_psn", ctypes.c_uint32),
                ("departure", u64p), ("rate", u64p),
                ("pause", ctypes.POINTER(u64p)), ("n_pause", ctypes.c_uint32), ("mtu", ctypes.c_uint32),
                ("credit", ctypes.POINTER(TxCredit)),
                ("first", ctypes.POINTER(TxFrame)), ("middle", ctypes.POINTER(TxFrame)),
                ("last", ctypes.POINTER(TxFrame)),
                ("msg_len", ctypes.c_uint64), ("msg_sent", ctypes.c_uint64),
                ("packets", ctypes.c_uint64), ("bytes", ctypes.c_uint64), ("pauses", ctypes.c_uint64),
                ("send_errors", ctypes.c_uint64),
                ("log", ctypes.c_void_p), ("log_len", ctypes.c_uint64), ("log_cap", ctypes.c_uint64),
                ("naks", u64p), ("naks_seen", ctypes.c_uint64), ("retransmits", ctypes.c_uint64),
                ("high_psn", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("held_since", ctypes.c_uint64),
                ("port", ctypes.POINTER(TxPort)), ("weight", ctypes.POINTER(ctypes.c_uint32)),
                ("vtag", ctypes.c_uint64)]


TxPort._fields_ = [("free_at", ctypes.c_uint64), ("ps_per_byte", ctypes.c_uint64), ("vclock", ctypes.c_uint64),
                   ("qps", ctypes.POINTER(ctypes.POINTER(TxQp))),
                   ("n_qps", ctypes.c_uint32), ("slack_ns", ctypes.c_uint32), ("last", ctypes.c_void_p)]


class TxSchedEntry(ctypes.Structure):
    _fields_ = [("due", ctypes.c_uint64), ("slot", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class TxSched(ctypes.Structure):
    _fields_ = [("qps", ctypes.POINTER(ctypes.POINTER(TxQp))), ("heap", ctypes.POINTER(TxSchedEntry)),
                ("n", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("credit_waits", ctypes.c_uint64),
                ("doorbell", u64p), ("doorbell_seen", ctypes.c_uint64)]


def word_pointers(addresses: list[int]):
    """A C array of uint64_t pointers (keep it alive while C may read it)."""
    return (u64p * max(1, len(addresses)))(*(ctypes.cast(a, u64p) for a in addresses))


@functools.cache
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_shared_library("prctx", sorted(ENGINE_DIR.glob("*.c")),
                                               list(ENGINE_DIR.glob("*.h")))))
    lib.tx_frame_patch.argtypes = [ctypes.POINTER(TxFrame), ctypes.c_uint32]
    lib.tx_frame_patch.restype = None
    lib.tx_sched_push.argtypes = [ctypes.POINTER(TxSched), ctypes.c_uint32, ctypes.c_uint64]
    lib.tx_sched_push.restype = None
    lib.tx_sched_remove.argtypes = [ctypes.POINTER(TxSched), ctypes.c_uint32]
    lib.tx_sched_remove.restype = ctypes.c_int
    lib.tx_run.argtypes = [ctypes.POINTER(TxSched), ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                           ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32), u64p]
    lib.tx_run.restype = ctypes.c_int
    lib.tx_bare_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64, u64p]
    lib.tx_bare_send.restype = ctypes.c_uint64
    return lib
