"""The TX engine: one event loop sends the RoCEv2 traffic of every host.

Each QP has a queue of messages, segmented lazily into MTU packets with
consecutive PSNs; frames come from per-QP templates with the PSN patched
and the ICRC recomputed (no scapy in the loop). A heap orders QPs by the
departure time nic_tx publishes for them (the cooperative pacer): a QP's
next packet leaves no earlier than that. nic_tx runs inside the send call,
so the departure time it publishes is there to read when send() returns.

Fidelity is part of the result: per packet, how late it left against its
departure time, and the rate the QP achieved against the rate BPF set; a
run whose engine could not keep up (it, not congestion control, set the
rates) says so.
"""
from __future__ import annotations

import ctypes
import gc
import heapq
import struct
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

from dataplane import roce

CLOCK = time.CLOCK_MONOTONIC          # the clock of bpf_ktime_get_ns
BTH_AT = roce.ETH_BYTES + 20 + roce.UDP_BYTES
PSN_AT = BTH_AT + 9                   # 24-bit PSN
MASKED_PSN_AT = 8 + PSN_AT - roce.ETH_BYTES   # the same in the ICRC's masked copy
PSN_MASK, ICRC_BYTES = roce.PSN_MASK, roce.ICRC_BYTES
crc32 = zlib.crc32
pack_icrc = struct.Struct("<I").pack_into
SPIN_BELOW_NS = 500_000               # closer than this to a departure: spin, do not sleep
PR_SET_TIMERSLACK = 29
# (only, first, middle, last) opcodes per message kind
OPCODES = {"write": (roce.WRITE_ONLY, roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST),
           "send": (roce.SEND_ONLY, roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST)}
CREDIT_RETRY_NS = 5_000               # a QP held by a full wire looks again this much later
# struct qp_tx as 64-bit words: the fields the loop reads
QP_TX_WORDS, DEPARTURE_WORD, RATE_WORD = 8, 0, 4


def now_ns() -> int:
    return time.clock_gettime_ns(CLOCK)


class FrameFactory:
    """RoCEv2 frames of one QP from cached templates: the PSN is patched and
    the ICRC recomputed over a masked copy kept beside each template."""

    def __init__(self, dest_qp: int, addr: roce.FlowAddr):
        self.dest_qp = dest_qp
        self.addr = addr
        self._templates: dict[tuple[int, int, int], tuple[bytearray, bytearray]] = {}

    def frame(self, opcode: int, psn: int, payload_len: int, dma_len: int) -> bytearray:
        """The frame, valid until the next call (send it before asking again)."""
        key = (opcode, payload_len, dma_len)
        if key not in self._templates:
            frame = bytearray(roce.data_packet(
                opcode, self.dest_qp, 0, bytes(payload_len), addr=self.addr, ecn=roce.NOT_ECT,
                ackreq=opcode in (roce.SEND_LAST, roce.SEND_ONLY, roce.WRITE_LAST, roce.WRITE_ONLY),
                dma_len=dma_len))
            masked = bytearray(b"\xff" * 8 + frame[roce.ETH_BYTES:-roce.ICRC_BYTES])
            ip = 8
            for at in (ip + 1, ip + 8, ip + 10, ip + 11, ip + 26, ip + 27, ip + 32):
                masked[at] = 0xFF         # TOS, TTL, IP csum, UDP csum, FECN/BECN byte
            self._templates[key] = (frame, masked)
        frame, masked = self._templates[key]
        psn_bytes = psn.to_bytes(3, "big")
        frame[PSN_AT:PSN_AT + 3] = psn_bytes
        masked[MASKED_PSN_AT:MASKED_PSN_AT + 3] = psn_bytes
        pack_icrc(frame, len(frame) - ICRC_BYTES, crc32(masked))
        return frame


@dataclass
class Message:
    kind: str           # "write" or "send"
    length: int         # bytes
    tag: object = None  # the poster's handle, returned on completion
    sent: int = 0       # payload bytes already sent


@dataclass
class PortCredit:
    """Lossless mode's bound on what is in flight towards a last-hop switch
    port: bytes sent to it minus bytes its destination host's QPs have
    received (from nic_rx's counters), at most `budget`. It bounds the real
    queue, which the marking model cannot see."""

    budget: int
    recv_words: list = field(default_factory=list)   # rx-bytes words of the QPs it delivers to
    sent: int = 0


@dataclass
class SendQp:
    """A sending QP: its socket, its frames and its queue of messages."""

    qpn: int
    sock: object
    frames: FrameFactory
    mtu: int                                   # RoCE MTU: payload bytes per packet
    next_psn: int = 0
    queue: deque = field(default_factory=deque)
    packets: int = 0
    bytes: int = 0
    pause_words: list = field(default_factory=list)   # pause-until words of the ports on its path
    pauses: int = 0                                    # times a pause held this QP
    credit: "PortCredit | None" = None          # lossless: the last hop's in-flight bound
    # fidelity: per packet (send time ns, wire bytes, BPF rate Q20, lateness ns)
    log: list = field(default_factory=list)

    def next_frame(self) -> tuple[bytearray, Message | None]:
        """The next packet of the head message; the message too if this
        packet completes it."""
        msg = self.queue[0]
        sent, length = msg.sent, msg.length
        size = min(self.mtu, length - sent)
        last = sent + size >= length
        ops = OPCODES[msg.kind]
        if sent:
            frame = self.frames.frame(ops[3] if last else ops[2], self.next_psn, size, 0)
        else:
            frame = self.frames.frame(ops[0] if last else ops[1], self.next_psn, size, length)
        self.next_psn = (self.next_psn + 1) & PSN_MASK
        msg.sent = sent + size
        if last:
            self.queue.popleft()
            return frame, msg
        return frame, None


class TxEngine:
    """departures: an MmapArray of the NIC's qp_tx (next_departure_ns, rate)."""

    def __init__(self, departures, on_message_sent=None, log_packets: bool = True, pauses=None,
                 deliveries=None):
        """pauses: an MmapArray of the switch ports' stats, whose pause-until
        times lossless ports set (QPs name theirs in pause_words);
        deliveries: an MmapArray of nic_rx's per-QP counters (PortCredit)."""
        self._words = departures.words()
        self._pause = pauses.words() if pauses is not None else None
        self._rx = deliveries.words() if deliveries is not None else None
        self.credit_waits = 0
        self.qps: dict[int, SendQp] = {}
        self.on_message_sent = on_message_sent
        self.log_packets = log_packets
        self._heap: list[tuple[int, int]] = []     # (departure ns, qpn) of QPs with work
        self._queued: set[int] = set()
        self.send_errors = 0

    def add_qp(self, qpn: int, sock, dest_qp: int, addr: roce.FlowAddr, mtu: int) -> SendQp:
        qp = SendQp(qpn, sock, FrameFactory(dest_qp, addr), mtu)
        self.qps[qpn] = qp
        return qp

    def post(self, qpn: int, length: int, kind: str = "write", tag=None) -> None:
        if not 0 < length < 2**32:
            raise ValueError(f"a message is 1..2^32-1 bytes (the RETH DMA length), got {length}")
        if kind not in ("write", "send"):
            raise ValueError(f"message kind must be write or send, not {kind!r}")
        qp = self.qps[qpn]
        qp.queue.append(Message(kind, length, tag))
        if qpn not in self._queued:
            self._queued.add(qpn)
            heapq.heappush(self._heap, (self._words[qpn * QP_TX_WORDS + DEPARTURE_WORD], qpn))

    def run(self, duration_s: float | None = None, until=None) -> None:
        """Send until every queue is empty, duration_s has passed, or
        until() says so (checked between packets). The garbage collector
        is paused meanwhile: its passes over a growing packet log stall the
        loop for longer than the pacing slack."""
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._run(duration_s, until)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _run(self, duration_s: float | None, until) -> None:
        # Sleeps end up to 50 us late by default (timer slack): ask for 1 ns.
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
        clock, clock_id = time.clock_gettime_ns, CLOCK      # locals: this loop is the hot path
        heappop, heappush, heapreplace = heapq.heappop, heapq.heappush, heapq.heapreplace
        end = clock(clock_id) + int(duration_s * 1e9) if duration_s is not None else 1 << 63
        heap, words, qps, log_packets = self._heap, self._words, self.qps, self.log_packets
        pause_words, rx = self._pause, self._rx
        while heap:
            departure, qpn = heap[0]
            now = clock(clock_id)
            if now >= end or until is not None and until():
                return
            if now < departure:
                if departure - now > SPIN_BELOW_NS:
                    time.sleep((departure - now - SPIN_BELOW_NS) / 1e9)
                continue
            qp = qps[qpn]
            if qp.pause_words:
                paused = max(pause_words[w] for w in qp.pause_words)
                if paused > now:                 # a port on the path said pause: hold the QP
                    qp.pauses += 1
                    heapreplace(heap, (paused, qpn))
                    continue
            credit = qp.credit
            if credit is not None and credit.sent - sum(rx[w] for w in credit.recv_words) > credit.budget:
                self.credit_waits += 1            # the way to the port is full
                heapreplace(heap, (now + CREDIT_RETRY_NS, qpn))
                continue
            frame, done = qp.next_frame()
            try:
                qp.sock.send(frame)
            except OSError:
                self.send_errors += 1        # the qdisc is full: counted, packet lost
            size = len(frame)
            qp.packets += 1
            qp.bytes += size
            if credit is not None:
                credit.sent += size
            base = qpn * QP_TX_WORDS
            if log_packets:
                qp.log.append((clock(clock_id), size, words[base + RATE_WORD], now - departure))
            if done is not None and self.on_message_sent is not None:
                self.on_message_sent(qpn, done)
            if qp.queue:
                heapreplace(heap, (words[base + DEPARTURE_WORD], qpn))
            else:
                heappop(heap)
                self._queued.discard(qpn)
