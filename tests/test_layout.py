"""Every struct and constant shared by C and Python agrees field by field
with the compiled headers, and the check would see a drifted mirror."""
import ctypes

import pytest

from dataplane import layout
from dataplane.nic import QpTx


def test_every_mirror_and_constant_matches_the_compiled_headers():
    mirrors, constants = layout.project_mirrors()
    assert len(mirrors) >= 18 and len(constants) >= 25      # the inventory did not shrink unnoticed
    assert layout.mismatches() == []


def _with(struct_name: str, python) -> list[layout.Mirror]:
    mirrors, _ = layout.project_mirrors()
    return [layout.Mirror(m.c_struct, python) if m.c_struct == struct_name else m for m in mirrors]


def test_swapped_fields_are_caught():
    fields = list(QpTx._fields_)
    rate, alpha = [n for n, _ in fields].index("rate"), [n for n, _ in fields].index("alpha")
    fields[rate], fields[alpha] = fields[alpha], fields[rate]
    swapped = type("SwappedQpTx", (ctypes.Structure,), {"_fields_": fields})
    assert ctypes.sizeof(swapped) == ctypes.sizeof(QpTx)        # a size check alone passes
    rate_at, alpha_at = QpTx.rate.offset, QpTx.alpha.offset
    assert sorted(layout.mismatches(_with("qp_tx", swapped))) == [
        f"qp_tx.alpha: offset {alpha_at} size 8 in C, offset {rate_at} size 8 in Python",
        f"qp_tx.rate: offset {rate_at} size 8 in C, offset {alpha_at} size 8 in Python"]


def test_a_resized_or_missing_field_and_a_drifted_constant_are_caught():
    short = type("ShortQpTx", (ctypes.Structure,), {"_fields_": QpTx._fields_[:-1]})
    assert layout.mismatches(_with("qp_tx", short)) == [
        f"struct qp_tx: {ctypes.sizeof(QpTx)} bytes in C, "
        f"{ctypes.sizeof(QpTx) - ctypes.sizeof(QpTx._fields_[-1][1])} in Python"]
    narrow = type("NarrowQpTx", (ctypes.Structure,),
                  {"_fields_": [(n, ctypes.c_uint32 if n == "cnps_merged" else t) for n, t in QpTx._fields_]})
    assert any(m.startswith("qp_tx.cnps_merged: ") for m in layout.mismatches(_with("qp_tx", narrow)))
    mirrors, constants = layout.project_mirrors()
    assert layout.mismatches(mirrors, {**constants, "NIC_MAX_QPS": 16}) == ["NIC_MAX_QPS: 4096 in C, 16 in Python"]


def test_a_field_c_does_not_have_fails_the_build():
    renamed = type("RenamedQpTx", (ctypes.Structure,),
                   {"_fields_": [("departure_ns" if n == "next_departure_ns" else n, t) for n, t in QpTx._fields_]})
    with pytest.raises(layout.LayoutBuildError, match="departure_ns"):
        layout.mismatches(_with("qp_tx", renamed))


def test_hot_loop_word_offsets_follow_the_mirrors():
    from dataplane.nic import DEPARTURE_WORD, QP_RX_WORDS, QP_TX_WORDS, RATE_WORD, RX_BYTES_WORD
    from dataplane.switch import PAUSE_UNTIL_WORD, PORT_STATS_WORDS

    c = layout.c_layout(*layout.project_mirrors())
    assert QP_TX_WORDS * 8 == c[("size", "qp_tx")] and QP_RX_WORDS * 8 == c[("size", "qp_rx")]
    assert DEPARTURE_WORD * 8 == c[("field", "qp_tx", "next_departure_ns")][0]
    assert RATE_WORD * 8 == c[("field", "qp_tx", "rate")][0]
    assert RX_BYTES_WORD * 8 == c[("field", "qp_rx", "bytes")][0]
    assert PORT_STATS_WORDS * 8 == c[("size", "port_stats")]
    assert PAUSE_UNTIL_WORD * 8 == c[("field", "port_stats", "pause_until_ns")][0]
