"""dataplane.roce: builders, the independent ICRC, the parser, and tshark as
an outside decoder."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.l2 import Ether

from dataplane import roce, tshark
from frames import IP_AT, patch, valid_roce, with_ip_options


def scapy_icrc(frame: bytes) -> int:
    """The ICRC scapy computes for this frame (re-dissected, field cleared)."""
    pkt = Ether(frame)
    pkt[BTH].icrc = None
    return struct.unpack("<I", bytes(pkt)[-4:])[0]


@settings(max_examples=300, deadline=None)
@given(valid_roce)
def test_independent_icrc_equals_scapy_for_every_opcode(frame):
    assert roce.compute_icrc(frame) == scapy_icrc(frame)
    assert roce.icrc_valid(frame)


@settings(max_examples=200, deadline=None)
@given(valid_roce, st.data())
def test_icrc_covers_invariant_bytes_and_skips_variant_ones(frame, data):
    ihl = (frame[IP_AT] & 0x0F) * 4
    variant = {IP_AT + 1, IP_AT + 8, IP_AT + 10, IP_AT + 11,   # TOS, TTL, IP checksum
               IP_AT + ihl + 6, IP_AT + ihl + 7,               # UDP checksum
               IP_AT + ihl + 8 + 4}                            # FECN/BECN/resv6
    # Only bytes the parser does not use for framing: flipping a length or
    # version byte makes a different (or no) packet, not a corrupted one.
    at = data.draw(st.sampled_from(sorted(
        {IP_AT + 1, IP_AT + 8, IP_AT + 12, IP_AT + 19, IP_AT + ihl, IP_AT + ihl + 6,
         IP_AT + ihl + 8 + 4, IP_AT + ihl + 8 + 5, len(frame) - 5})))
    flipped = bytearray(frame)
    flipped[at] ^= data.draw(st.integers(1, 255))
    assert roce.icrc_valid(bytes(flipped)) == (at in variant)


def test_parse_returns_the_fields_that_were_built():
    addr = roce.FlowAddr(sport=50001, src_ip="198.18.1.1", dst_ip="198.18.2.2")
    frame = roce.data_packet(roce.WRITE_FIRST, 0xABCDEF, 0x123456, b"hello", addr=addr,
                             ecn=roce.CE, ackreq=True)
    p = roce.parse(frame)
    assert (p.opcode, p.dest_qp, p.psn, p.ecn, p.sport, p.ackreq, p.becn) == \
        (roce.WRITE_FIRST, 0xABCDEF, 0x123456, roce.CE, 50001, True, False)
    assert p.payload == b"hello"               # RETH skipped, pad bytes stripped
    assert p.src_ip == bytes([198, 18, 1, 1]) and p.dst_ip == bytes([198, 18, 2, 2])
    assert p.wire_bytes == len(frame)


def test_cnp_has_the_fields_the_spec_requires():
    p = roce.parse(roce.cnp_packet(0x42))
    frame = roce.cnp_packet(0x42)
    assert (p.opcode, p.dest_qp, p.psn, p.becn) == (0x81, 0x42, 0, True)
    assert frame[IP_AT + 1] >> 2 == roce.CNP_DSCP and p.ecn == roce.NOT_ECT
    assert struct.unpack_from("!H", frame, IP_AT + 28 + 2)[0] == 0xFFFF   # P_Key
    assert len(frame) == 14 + 20 + 8 + 12 + 16 + 4


@pytest.mark.parametrize("kind,length,mtu,ops", [
    ("write", 5000, 2048, [roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST]),
    ("write", 2048, 2048, [roce.WRITE_ONLY]),
    ("send", 4096, 2048, [roce.SEND_FIRST, roce.SEND_LAST]),
    ("send", 0, 1024, [roce.SEND_ONLY]),
])
def test_segment_message_uses_rc_opcodes_and_consecutive_psns(kind, length, mtu, ops):
    parsed = [roce.parse(f) for f in roce.segment_message(kind, 9, 100, length, mtu)]
    assert [p.opcode for p in parsed] == ops
    assert [p.psn for p in parsed] == list(range(100, 100 + len(ops)))
    assert sum(len(p.payload) for p in parsed) == length
    assert [p.ackreq for p in parsed] == [False] * (len(ops) - 1) + [True]


def test_ip_options_frame_still_parses_with_the_same_qp():
    frame = with_ip_options(roce.data_packet(roce.SEND_ONLY, 77, 5, b"abc"))
    p = roce.parse(frame)
    assert p is not None and p.dest_qp == 77 and p.payload == b"abc"
    assert roce.compute_icrc(frame) == scapy_icrc(frame) == p.icrc


@pytest.mark.parametrize("mutate", [
    lambda f: f[:40],                                   # cut inside the BTH
    lambda f: f[:-1],                                   # IP total length beyond the frame
    lambda f: patch(f, IP_AT, "!B", 0x65),              # IP version 6 under ethertype 0x0800
    lambda f: patch(f, IP_AT, "!B", 0x44),              # IHL 4
    lambda f: patch(f, IP_AT + 6, "!H", 0x2000),        # more fragments
    lambda f: patch(f, IP_AT + 6, "!H", 0x0001),        # fragment offset
    lambda f: patch(f, IP_AT + 9, "!B", 6),             # TCP
    lambda f: patch(f, IP_AT + 22, "!H", 4792),         # another UDP port
    lambda f: patch(f, IP_AT + 24, "!H", 30),           # UDP length disagrees with IP
    lambda f: patch(f, 12, "!H", 0x86DD),               # not IPv4
], ids=["short-bth", "short-ip", "ipv6-version", "ihl4", "mf", "offset", "tcp",
        "udp-port", "udp-len", "ethertype"])
def test_parse_rejects_malformed_frames(mutate):
    assert roce.parse(mutate(roce.data_packet(roce.SEND_ONLY, 1, 1, b"x" * 40))) is None


@pytest.mark.skipif(not tshark.available(), reason="tshark not installed")
def test_tshark_decodes_our_packets_as_bth_with_our_fields():
    frames = (roce.segment_message("write", 0x123456, 0xFFFFFE, 5000, 2048)
              + [roce.data_packet(roce.SEND_ONLY, 3, 77, b"y" * 33), roce.ack_packet(8, 9),
                 roce.cnp_packet(0x42)])
    rows = tshark.decode_frames(frames)
    assert len(rows) == len(frames)
    for frame, row in zip(frames, rows):
        p = roce.parse(frame)
        assert (row["opcode"], row["destqp"], row["psn"]) == (p.opcode, p.dest_qp, p.psn)
        if row["crc"] is not None:   # tshark names no CNP opcode, so shows no ICRC there
            assert row["crc"] == struct.unpack(">I", struct.pack("<I", p.icrc))[0]
    assert rows[2]["psn"] == 0   # PSN wraps at 24 bits


@settings(max_examples=300, deadline=None)
@given(opcode=st.sampled_from([roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_ONLY,
                               roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST, roce.WRITE_ONLY]),
       qp=st.integers(0, roce.QPN_MASK), psn=st.integers(0, roce.PSN_MASK), length=st.integers(0, 4096),
       ecn=st.integers(0, 3), ackreq=st.booleans(), dma_len=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
       sport=st.integers(0, 65535), ip=st.ip_addresses(v=4))
def test_the_struct_builder_equals_the_scapy_one(opcode, qp, psn, length, ecn, ackreq, dma_len, sport, ip):
    addr = roce.FlowAddr(src_mac="02:aa:00:00:10:01", dst_mac="02:bb:00:00:20:02", src_ip=str(ip),
                         dst_ip="198.19.255.254", sport=sport)
    assert roce.data_frame(opcode, qp, psn, length, addr=addr, ecn=ecn, ackreq=ackreq, dma_len=dma_len) == \
        roce.data_packet(opcode, qp, psn, bytes(length), addr=addr, ecn=ecn, ackreq=ackreq, dma_len=dma_len)
    with pytest.raises(ValueError):
        roce.data_frame(roce.ACK, qp, psn, length)
