"""ctypes mirrors of the structs in bpf/include/roce_defs.h.

dataplane/layout.py checks each mirror field by field against the header.
"""
import ctypes


class QpCounters(ctypes.Structure):
    """struct qp_counters: per destination QP receive counters."""

    _fields_ = [
        ("packets", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
    ]


def read_qp_counters(table) -> dict[int, tuple[int, int]]:
    """A BCC hash of qp -> struct qp_counters as {qp: (packets, bytes)}."""
    return {key.value: (leaf.packets, leaf.bytes) for key, leaf in table.items()}
