"""Build and parse RoCEv2 frames (Ethernet / IPv4 / UDP 4791 / BTH ... / ICRC).

Building uses scapy.contrib.roce (which fills in the ICRC); parsing and the
ICRC check are plain struct code, independent of scapy, fast enough for
captures, and mirror the acceptance rules of bpf/include/parse.h.
"""
from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.fields import IntField, XIntField, XLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

ROCE_V2_UDP_PORT = 4791
ETH_BYTES = 14
IPV4_BYTES = 20
UDP_BYTES = 8
BTH_BYTES = 12
RETH_BYTES = 16
ICRC_BYTES = 4
DATA_HEADER_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES    # around each packet's payload
QPN_MASK = 0xFFFFFF
PSN_MASK = 0xFFFFFF

# RC opcodes (IBTA vol. 1, table 38) and the CNP opcode (RoCEv2 annex).
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
ACK = 0x11
CNP = 0x81
OPCODE_NAMES = {
    SEND_FIRST: "SEND_FIRST", SEND_MIDDLE: "SEND_MIDDLE", SEND_LAST: "SEND_LAST",
    SEND_ONLY: "SEND_ONLY", WRITE_FIRST: "WRITE_FIRST", WRITE_MIDDLE: "WRITE_MIDDLE",
    WRITE_LAST: "WRITE_LAST", WRITE_ONLY: "WRITE_ONLY", ACK: "ACK", CNP: "CNP",
}
RETH_OPCODES = (WRITE_FIRST, WRITE_ONLY)

# ECN codepoints (low two bits of the IPv4 TOS byte).
NOT_ECT, ECT1, ECT0, CE = 0b00, 0b01, 0b10, 0b11
CNP_DSCP = 48


class RETH(Packet):
    """RDMA Extended Transport Header (16 B), on WRITE first/only; scapy has none."""

    name = "RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_len", 0),
    ]


for _op in RETH_OPCODES:
    bind_layers(BTH, RETH, opcode=_op)


def write_payload_bytes(frame_bytes: int, packets: int, messages: int) -> int:
    """The payload in frame_bytes of `packets` RDMA WRITE packets that make
    up `messages` whole messages (a RETH on each one's first packet)."""
    return frame_bytes - DATA_HEADER_BYTES * packets - RETH_BYTES * messages


@dataclass(frozen=True)
class FlowAddr:
    """Where a QP's packets go: L2/L3 endpoints and the UDP source port,
    which RoCEv2 uses as per-QP entropy for ECMP."""

    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: str = "198.18.0.1"
    dst_ip: str = "198.18.0.2"
    sport: int = 49152


def _frame(addr: FlowAddr, tos: int, transport: Packet) -> bytes:
    # UDP checksum 0: RoCEv2 relies on the ICRC (and veth offload would not
    # fill it in anyway).
    pkt = (Ether(src=addr.src_mac, dst=addr.dst_mac)
           / IP(src=addr.src_ip, dst=addr.dst_ip, tos=tos, flags="DF", ttl=64, id=0)
           / UDP(sport=addr.sport, dport=ROCE_V2_UDP_PORT, chksum=0)
           / transport)
    return bytes(pkt)


def data_packet(opcode: int, dest_qp: int, psn: int, payload: bytes = b"", *,
                addr: FlowAddr = FlowAddr(), ecn: int = ECT0, ackreq: bool = False,
                va: int = 0, rkey: int = 0, dma_len: int | None = None) -> bytes:
    """An RC SEND or WRITE packet; WRITE first/only carry a RETH."""
    if opcode not in OPCODE_NAMES or opcode in (ACK, CNP):
        raise ValueError(f"not a data opcode: {opcode:#x}")
    bth = BTH(opcode=opcode, dqpn=dest_qp & QPN_MASK, psn=psn & PSN_MASK,
              ackreq=int(ackreq), padcount=(-len(payload)) % 4)
    layers = bth
    if opcode in RETH_OPCODES:
        layers = layers / RETH(va=va, rkey=rkey,
                               dma_len=len(payload) if dma_len is None else dma_len)
    # The pad count tells the receiver how many bytes of 4-byte alignment to strip.
    return _frame(addr, ecn, layers / Raw(payload + b"\x00" * bth.padcount))


def data_frame(opcode: int, dest_qp: int, psn: int, payload_len: int, *, addr: FlowAddr = FlowAddr(),
               ecn: int = ECT0, ackreq: bool = False, dma_len: int | None = None) -> bytes:
    """data_packet's frame for a zero payload, packed with struct instead
    of scapy (1 ms a frame there, ~20 us here): the TX engine builds its
    templates with it, and tests hold the two equal."""
    if opcode not in OPCODE_NAMES or opcode in (ACK, CNP):
        raise ValueError(f"not a data opcode: {opcode:#x}")
    pad = -payload_len % 4
    transport = struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, dest_qp & QPN_MASK,
                            int(ackreq) << 31 | psn & PSN_MASK)
    if opcode in RETH_OPCODES:
        transport += struct.pack("!QII", 0, 0, payload_len if dma_len is None else dma_len)
    transport += bytes(payload_len + pad)
    udp_len = UDP_BYTES + len(transport) + ICRC_BYTES
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, ecn, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                               socket.inet_aton(addr.src_ip), socket.inet_aton(addr.dst_ip)))
    total = sum(struct.unpack("!10H", ip))
    total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = struct.pack("!H", ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF)
    frame = (bytes.fromhex(addr.dst_mac.replace(":", "")) + bytes.fromhex(addr.src_mac.replace(":", ""))
             + b"\x08\x00" + bytes(ip) + struct.pack("!HHHH", addr.sport, ROCE_V2_UDP_PORT, udp_len, 0)
             + transport + bytes(ICRC_BYTES))
    return frame[:-ICRC_BYTES] + struct.pack("<I", compute_icrc(frame))


def segment_message(kind: str, dest_qp: int, first_psn: int, length: int, mtu: int, *,
                    addr: FlowAddr = FlowAddr(), ecn: int = ECT0) -> list[bytes]:
    """A SEND or WRITE message of `length` bytes as RC packets of at most
    `mtu` payload bytes each: ONLY, or FIRST, MIDDLE..., LAST; consecutive PSNs."""
    opcodes = {"send": (SEND_ONLY, SEND_FIRST, SEND_MIDDLE, SEND_LAST),
               "write": (WRITE_ONLY, WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST)}
    if kind not in opcodes:
        raise ValueError(f"message kind must be send or write, not {kind!r}")
    if mtu <= 0 or length < 0:
        raise ValueError("mtu must be positive and length non-negative")
    only, first, middle, last = opcodes[kind]
    sizes = [mtu] * (length // mtu) + ([length % mtu] if length % mtu or length == 0 else [])
    frames = []
    for i, size in enumerate(sizes):
        if len(sizes) == 1:
            op = only
        else:
            op = first if i == 0 else last if i == len(sizes) - 1 else middle
        frames.append(data_packet(op, dest_qp, first_psn + i, bytes(size), addr=addr, ecn=ecn,
                                  dma_len=length, ackreq=(i == len(sizes) - 1)))
    return frames


def ack_packet(dest_qp: int, psn: int, msn: int = 0, syndrome: int = 0, *,
               addr: FlowAddr = FlowAddr()) -> bytes:
    """An RC ACK (BTH + AETH)."""
    return _frame(addr, NOT_ECT, BTH(opcode=ACK, dqpn=dest_qp & QPN_MASK, psn=psn & PSN_MASK)
                  / AETH(syndrome=syndrome, msn=msn & 0xFFFFFF))


def cnp_packet(dest_qp: int, *, addr: FlowAddr = FlowAddr()) -> bytes:
    """A congestion notification: opcode 0x81, BECN set, P_Key 0xffff, PSN 0,
    16 reserved bytes, sent with DSCP 48 and not ECN-capable."""
    return _frame(addr, CNP_DSCP << 2 | NOT_ECT,
                  BTH(opcode=CNP, becn=1, pkey=0xFFFF, dqpn=dest_qp & QPN_MASK, psn=0)
                  / CNPPadding())


@dataclass(frozen=True)
class RoceFrame:
    """The fields of a parsed RoCEv2 frame that the emulator uses."""

    opcode: int
    dest_qp: int
    psn: int
    becn: bool
    ackreq: bool
    ecn: int
    sport: int
    src_ip: bytes
    dst_ip: bytes
    wire_bytes: int       # Ethernet header + IP total length (no trailer padding)
    payload: bytes        # after BTH and RETH/AETH/CNP fields, pad bytes stripped
    icrc: int             # as carried on the wire (little-endian CRC32)


def parse(frame: bytes) -> RoceFrame | None:
    """Parse a RoCEv2-over-IPv4 frame, or None when it is not one or is
    malformed: too short, IPv4 with a bad version or IHL, a fragment, a
    total length beyond the frame, a UDP length that disagrees with the IP
    payload length, or too short for BTH + ICRC."""
    if len(frame) < ETH_BYTES + 20:
        return None
    if frame[12:14] != b"\x08\x00":
        return None
    ver_ihl, tos, tot_len, _ident, frag, _ttl, proto = struct.unpack_from("!BBHHHBB", frame, ETH_BYTES)
    ihl = (ver_ihl & 0x0F) * 4
    if ver_ihl >> 4 != 4 or ihl < 20 or frag & 0x3FFF or proto != 17:
        return None
    udp_at = ETH_BYTES + ihl
    bth_at = udp_at + UDP_BYTES
    if len(frame) < bth_at + BTH_BYTES:
        return None
    sport, dport, udp_len = struct.unpack_from("!HHH", frame, udp_at)
    if dport != ROCE_V2_UDP_PORT:
        return None
    if ETH_BYTES + tot_len > len(frame) or udp_len != tot_len - ihl:
        return None
    if udp_len < UDP_BYTES + BTH_BYTES + ICRC_BYTES:
        return None
    opcode, flags, _pkey, qp_word, psn_word = struct.unpack_from("!BBHII", frame, bth_at)
    end = ETH_BYTES + tot_len
    body = bth_at + BTH_BYTES + _extension_bytes(opcode)
    body_end = max(body, end - ICRC_BYTES - (flags >> 4 & 0b11))
    return RoceFrame(
        opcode=opcode,
        dest_qp=qp_word & QPN_MASK,
        psn=psn_word & PSN_MASK,
        becn=bool(qp_word >> 30 & 1),
        ackreq=bool(psn_word >> 31),
        ecn=tos & 0b11,
        sport=sport,
        src_ip=frame[ETH_BYTES + 12:ETH_BYTES + 16],
        dst_ip=frame[ETH_BYTES + 16:ETH_BYTES + 20],
        wire_bytes=end,
        payload=frame[body:body_end],
        icrc=struct.unpack_from("<I", frame, end - ICRC_BYTES)[0],
    )


def _extension_bytes(opcode: int) -> int:
    if opcode in RETH_OPCODES:
        return 16
    if opcode == ACK:
        return 4
    if opcode == CNP:
        return 16
    return 0


def compute_icrc(frame: bytes) -> int:
    """The invariant CRC of a RoCEv2-over-IPv4 frame, computed from the raw
    bytes: CRC32 over 8 bytes of 0xff (the masked LRH), the IP header with
    TOS, TTL and checksum masked to ones, the UDP header with its checksum
    masked, the BTH with its FECN/BECN/resv byte masked, and the payload."""
    ihl = (frame[ETH_BYTES] & 0x0F) * 4
    tot_len = struct.unpack_from("!H", frame, ETH_BYTES + 2)[0]
    ip = bytearray(frame[ETH_BYTES:ETH_BYTES + ihl])
    ip[1] = 0xFF                      # TOS (DSCP + ECN) changes hop by hop
    ip[8] = 0xFF                      # TTL
    ip[10:12] = b"\xff\xff"           # header checksum
    udp = bytearray(frame[ETH_BYTES + ihl:ETH_BYTES + ihl + UDP_BYTES])
    udp[6:8] = b"\xff\xff"            # UDP checksum
    rest = bytearray(frame[ETH_BYTES + ihl + UDP_BYTES:ETH_BYTES + tot_len - ICRC_BYTES])
    rest[4] = 0xFF                    # FECN | BECN | resv6
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest)) & 0xFFFFFFFF


def icrc_valid(frame: bytes) -> bool:
    """True when the frame parses as RoCEv2 and carries the right ICRC."""
    parsed = parse(frame)
    return parsed is not None and parsed.icrc == compute_icrc(frame)
