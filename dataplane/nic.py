"""The emulated RNIC's BPF object (bpf/nic.c) from Python: ctypes mirrors of
its map structs, loading, and typed access to QP contexts, hooks and
counters."""
from __future__ import annotations

import ctypes

from dataplane.cc import Hook, Params, State

MAX_QPS = 4096
MAX_PROCS = 256
SPORT_BASE = 0xC000
SPORT_QPN_MASK = 0x3FFF
F_KERNEL_PACER = 1
F_PASS_DATA = 2
QP_F_VALID = 1
STAMP_RING = 32


class NicConfig(ctypes.Structure):
    _fields_ = [("line_ps_per_byte", ctypes.c_uint64), ("pacing_slack_ns", ctypes.c_uint64),
                ("min_time_between_cnps_ns", ctypes.c_uint64), ("flags", ctypes.c_uint32),
                ("vtime_shift", ctypes.c_uint32)]


class QpCtx(ctypes.Structure):
    _fields_ = [("remote_qpn", ctypes.c_uint32), ("proc", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cnp_delay_ns", ctypes.c_uint32)]


class QpCc(ctypes.Structure):
    """struct qp_cc: the lock (opaque here), the bytes short of a 32-byte
    unit, the CC state, a waiting CNP, the count of CC events."""

    _fields_ = [("lock", ctypes.c_uint32), ("tx_residue_bytes", ctypes.c_uint32), ("st", State),
                ("cnp_due_ns", ctypes.c_uint64), ("events", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class NicStamp(ctypes.Structure):
    """When message msn (1, 2, ... per QP) completed; slot msn % STAMP_RING."""

    _fields_ = [("msn", ctypes.c_uint64), ("ns", ctypes.c_uint64)]


class NicDoorbell(ctypes.Structure):
    _fields_ = [("events", ctypes.c_uint64), ("reserved", ctypes.c_uint64 * 7)]


def stamp_at(words, ring_word: int, msn: int) -> int | None:
    """The time a stamp ring starting at 64-bit word ring_word holds for
    message msn, or None once a later message took its slot."""
    at = ring_word + 2 * (msn % STAMP_RING)
    ns = words[at + 1]
    return ns if words[at] == msn else None


class QpTx(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "next_departure_ns", "packets", "bytes", "early_packets", "rate", "alpha",
        "cnps_received", "cnps_merged", "acked_psn", "acks", "last_ack_ns", "nak_psn", "naks",
        "acked_msn")] + [("acked", NicStamp * STAMP_RING)]


class CcTraceRecord(ctypes.Structure):
    """struct cc_trace_record (bpf/include/cc_trace.h): one CC event the
    RNIC applied, its inputs and the state it left."""

    _fields_ = [("now_ns", ctypes.c_uint64), ("qpn", ctypes.c_uint32), ("seq", ctypes.c_uint32),
                ("kind", ctypes.c_uint32), ("bytes", ctypes.c_uint32), ("hook", Hook), ("st", State),
                ("mark", ctypes.c_uint64)]


class QpRx(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "packets", "bytes", "expected_psn", "out_of_sequence", "duplicates", "messages",
        "ce_packets", "cnps_sent", "last_cnp_ns", "delivered_packets", "delivered_bytes", "acks_sent",
        "naks_sent", "nak_outstanding", "last_message_ns", "reserved")] + [("taken", NicStamp * STAMP_RING)]


# The structs as arrays of 64-bit words, for hot loops over mmapped maps.
QP_RX_WORDS, RX_BYTES_WORD = ctypes.sizeof(QpRx) // 8, QpRx.bytes.offset // 8
QP_TX_WORDS, DEPARTURE_WORD, RATE_WORD = (ctypes.sizeof(QpTx) // 8, QpTx.next_departure_ns.offset // 8,
                                          QpTx.rate.offset // 8)
ACKED_PSN_WORD, NAK_PSN_WORD, NAKS_WORD = (QpTx.acked_psn.offset // 8, QpTx.nak_psn.offset // 8,
                                          QpTx.naks.offset // 8)
ACKED_RING_WORD = QpTx.acked.offset // 8
MESSAGES_WORD, TAKEN_RING_WORD = QpRx.messages.offset // 8, QpRx.taken.offset // 8


def sender_sport(qpn: int) -> int:
    """The UDP source port a sending QP uses: it carries the sender's QPN."""
    if not 0 < qpn < MAX_QPS:
        raise ValueError(f"QPN must be 1..{MAX_QPS - 1}, got {qpn}")
    return SPORT_BASE | qpn


def crc32_table() -> list[int]:
    """The reflected CRC-32 (polynomial 0xEDB88320) byte table; tests check
    a CRC computed with it against zlib's."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        table.append(c)
    return table


class CcTraceReader:
    """The CC trace ring (bpf/include/cc_trace.h) read from its mmapped
    maps: records copied out in bulk, each taken once its mark shows it
    whole."""

    def __init__(self, bpf):
        import numpy as np

        from dataplane.bpf_mmap import MmapArray

        self._ring = MmapArray(bpf["cc_trace"], CcTraceRecord)
        self._head = MmapArray(bpf["cc_trace_head"], ctypes.c_uint64)
        self._records = np.frombuffer(self._ring.items, dtype=np.uint8).reshape(self._ring.count, -1)
        self._mark_at = CcTraceRecord.mark.offset
        self.taken = 0

    def drain(self) -> bytes:
        import numpy as np

        head, size = self._head[0], self._ring.count
        if head - self.taken > size:
            raise RuntimeError(f"the CC trace ring was lapped: {head - self.taken - size} records overwritten "
                               f"(drain it more often or give it more records)")
        index = np.arange(self.taken, head, dtype=np.uint64)
        slots = (index % size).astype(np.int64)
        out = self._records[slots]                 # a copy: later writers cannot touch it
        marks = out[:, self._mark_at:self._mark_at + 8].copy().view(np.uint64).ravel()
        whole = marks == index + 1
        ready = len(whole) if whole.all() else int(np.argmin(whole))     # up to the first one still written
        self.taken += ready
        return out[:ready].tobytes()

    def close(self) -> None:
        self._records = None
        self._ring.close()
        self._head.close()


def cc_trace_records(raw: bytes) -> list[CcTraceRecord]:
    size = ctypes.sizeof(CcTraceRecord)
    return [CcTraceRecord.from_buffer_copy(raw, i) for i in range(0, len(raw), size)]


class Nic:
    """bpf/nic.c compiled and loaded: nic_tx (SCHED_CLS) and nic_rx (XDP)
    share its maps."""

    def __init__(self, defines: dict | None = None, cc_trace_records: int = 0):
        """cc_trace_records: record every CC event the RNIC applies into a
        ring of that many records (0: no trace), read with drain_cc_trace()
        often enough that the writers do not lap the reader."""
        from bcc import BPF

        from dataplane.bpf_build import compile_bpf

        if cc_trace_records:
            defines = {**(defines or {}), "NIC_CC_TRACE": True, "NIC_CC_TRACE_RECORDS": cc_trace_records}
        self.bpf = compile_bpf("nic", defines)
        self._trace = CcTraceReader(self.bpf) if cc_trace_records else None
        self.tx_fn = self.bpf.load_func("nic_tx", BPF.SCHED_CLS)
        self.rx_fn = self.bpf.load_func("nic_rx", BPF.XDP)
        table = self.bpf["crc32"]
        leaf = table.Leaf()
        for i, value in enumerate(crc32_table()):
            leaf.t[i] = value
        table[table.Key(0)] = leaf

    def _set(self, name: str, index: int, value: ctypes.Structure) -> None:
        table = self.bpf[name]
        table[table.Key(index)] = table.Leaf.from_buffer_copy(bytes(value))

    def _get(self, name: str, index: int, kind):
        table = self.bpf[name]
        return kind.from_buffer_copy(bytes(table[table.Key(index)]))

    def configure(self, line_rate_bps: float, pacing_slack_ns: int, min_time_between_cnps_ns: int,
                  params: Params, flags: int = 0, vtime_shift: int = 0) -> None:
        """vtime_shift: the unit of the wire time nic_tx stamps, 2^shift us
        (dataplane.switch.vtime_shift_for)."""
        self._set("nic_config", 0, NicConfig(
            line_ps_per_byte=round(8e12 / line_rate_bps), pacing_slack_ns=pacing_slack_ns,
            min_time_between_cnps_ns=min_time_between_cnps_ns, flags=flags, vtime_shift=vtime_shift))
        self._set("cc_params", 0, params)

    def add_qp(self, qpn: int, remote_qpn: int, proc: int = 0, cnp_delay_ns: int = 0) -> None:
        """cnp_delay_ns: CNPs to this QP take effect that long after they
        arrive (the feedback delay of links that add none)."""
        if not 0 < qpn < MAX_QPS or not 0 <= proc < MAX_PROCS:
            raise ValueError(f"QPN must be 1..{MAX_QPS - 1} and process 0..{MAX_PROCS - 1}")
        if not 0 <= cnp_delay_ns < 2**32:
            raise ValueError(f"CNP delay must be 0..{2**32 - 1} ns, got {cnp_delay_ns}")
        self._set("qp_ctx", qpn, QpCtx(remote_qpn=remote_qpn, proc=proc, flags=QP_F_VALID,
                                       cnp_delay_ns=cnp_delay_ns))

    def set_hook(self, proc: int, hook: Hook) -> None:
        self._set("proc_hook", proc, hook)

    def tx(self, qpn: int) -> QpTx:
        return self._get("qp_tx", qpn, QpTx)

    def rx(self, qpn: int) -> QpRx:
        return self._get("qp_rx", qpn, QpRx)

    def doorbell(self) -> int:
        return self._get("doorbell", 0, NicDoorbell).events

    def cc(self, qpn: int) -> "QpCc":
        return self._get("qp_cc", qpn, QpCc)

    def cc_state(self, qpn: int):
        return self.cc(qpn).st

    def fresh_cc(self, qpn: int) -> None:
        """Start qpn's congestion control over: nic_tx initialises a zeroed
        record at line rate on the next packet (the lock word is the
        kernel's and not written)."""
        self._set("qp_cc", qpn, QpCc())

    def drain_cc_trace(self) -> bytes:
        """The CC events recorded since the last drain, as raw
        CcTraceRecords in the ring's order (sort one QP's by seq: two CPUs
        may store out of order). Raises when records were overwritten
        before this drain: a replay needs every event."""
        return self._trace.drain()

    def reset(self, qps=range(MAX_QPS), procs=range(MAX_PROCS)) -> None:
        """Zero the per-QP and per-process entries (array maps cannot be
        emptied, only overwritten)."""
        for name, indices in (("qp_ctx", qps), ("qp_cc", qps), ("qp_tx", qps), ("qp_rx", qps),
                              ("proc_hook", procs), ("doorbell", [0])):
            table = self.bpf[name]
            zero = table.Leaf()
            for i in indices:
                table[table.Key(i)] = zero

    def close(self) -> None:
        if self._trace is not None:
            self._trace.close()
        self.bpf.cleanup()
