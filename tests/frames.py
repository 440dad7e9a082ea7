"""Frame builders and mutations shared by the packet tests."""
from __future__ import annotations

import struct

from hypothesis import strategies as st

from dataplane import roce

IP_AT = roce.ETH_BYTES


def patch(frame: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(frame)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def with_ip_options(frame: bytes) -> bytes:
    """The same packet with 4 bytes of IPv4 NOP options (IHL 6) and its ICRC
    recomputed (the options are part of the invariant header): still valid."""
    ihl_end = IP_AT + 20
    tot_len = struct.unpack_from("!H", frame, IP_AT + 2)[0]
    out = bytearray(frame[:ihl_end] + b"\x01\x01\x01\x01" + frame[ihl_end:])
    out[IP_AT] = 0x46
    struct.pack_into("!H", out, IP_AT + 2, tot_len + 4)
    struct.pack_into("<I", out, len(out) - roce.ICRC_BYTES, roce.compute_icrc(bytes(out)))
    return bytes(out)


def any_roce(opcode: int, qp: int, psn: int, payload: bytes, ecn: int, sport: int) -> bytes:
    addr = roce.FlowAddr(sport=sport)
    if opcode == roce.ACK:
        return roce.ack_packet(qp, psn, addr=addr)
    if opcode == roce.CNP:
        return roce.cnp_packet(qp, addr=addr)
    return roce.data_packet(opcode, qp, psn, payload, addr=addr, ecn=ecn)


valid_roce = st.builds(
    any_roce,
    opcode=st.sampled_from(sorted(roce.OPCODE_NAMES)),
    qp=st.one_of(st.integers(0, 7), st.integers(0, roce.QPN_MASK)),
    psn=st.integers(0, roce.PSN_MASK),
    payload=st.binary(max_size=300),
    ecn=st.sampled_from([roce.NOT_ECT, roce.ECT0, roce.ECT1, roce.CE]),
    sport=st.integers(1024, 65535),
)


@st.composite
def mutated_frames(draw) -> bytes:
    """Valid RoCEv2 frames, and frames a few changes away from valid:
    truncated, bytes overwritten anywhere in the headers, IP options, junk."""
    frame = draw(valid_roce)
    how = draw(st.sampled_from(["none", "truncate", "overwrite", "overwrite", "options", "junk"]))
    if how == "truncate":
        frame = frame[:draw(st.integers(14, len(frame) - 1))]
    elif how == "overwrite":
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, min(len(frame), 62) - 1))
            frame = frame[:at] + bytes([draw(st.integers(0, 255))]) + frame[at + 1:]
    elif how == "options":
        frame = with_ip_options(frame)
    elif how == "junk":
        frame = draw(st.binary(min_size=14, max_size=200))
    return frame
