"""A sending QP of the TX engine: its queue of messages, the C side's view
of it (counters, PSN, head message, packet log), lossless credit, and the
RC requester's state: messages sent but not acknowledged, and how a NAK,
a timeout or an ACK moves the send position (go-back-N)."""
from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass

import numpy as np

from dataplane import roce
from dataplane.fidelity import PACKET_LOG
from dataplane.tx_frames import FrameFactory
from dataplane.tx_native import PSN_BITS, TxCredit, TxPort, TxQp, u64p, word_pointers

PSN_MASK = (1 << PSN_BITS) - 1
PSN_HALF = 1 << (PSN_BITS - 1)
LOG_START = 1 << 16                   # packet-log entries per QP, doubled when full
# (only, first, middle, last) opcodes per message kind
OPCODES = {"write": (roce.WRITE_ONLY, roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST),
           "send": (roce.SEND_ONLY, roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST)}


def psn_distance(a: int, b: int) -> int:
    """How far b is after a, modulo 2^24 (>= PSN_HALF: b is before a)."""
    return (b - a) & PSN_MASK


@dataclass
class Message:
    kind: str           # "write" or "send"
    length: int         # bytes
    tag: object = None  # the poster's handle, returned on completion
    first_psn: int = -1     # set when it is first loaded to send
    packets: int = 0        # ... with the packet count at the QP's MTU
    sent: bool = False      # its last packet has left (once at least)
    on_complete: object = None  # on_complete(message) once its completion is visible
    completed_ns: int = 0       # when it became visible (CLOCK)

    def holds(self, psn: int) -> bool:
        return self.first_psn >= 0 and psn_distance(self.first_psn, psn) < self.packets

    def acked_by(self, acked_psn: int) -> bool:
        """An ACK up to acked_psn covers all of its packets."""
        end = (self.first_psn + self.packets) & PSN_MASK
        return self.first_psn >= 0 and psn_distance(end, acked_psn) < PSN_HALF


class PortCredit:
    """Lossless mode's bound on what is in flight towards a last-hop switch
    port: bytes sent to it minus bytes its destination host's QPs have
    received (from nic_rx's counters), at most `budget`. It bounds the real
    queue, which the marking model cannot see. Shared by the QPs whose
    path ends there."""

    def __init__(self, budget: int):
        self.c = TxCredit(budget=budget)
        self.recv_words: list[int] = []     # rx-bytes words (of nic_rx's counters) it watches
        self._rx = None

    @property
    def sent(self) -> int:
        return self.c.sent

    def watch(self, rx_addresses: list[int]) -> None:
        """Give C the addresses of recv_words."""
        self._rx = word_pointers(rx_addresses)
        self.c.rx, self.c.n_rx = self._rx, len(rx_addresses)


class NicPort:
    """A host NIC's port that its QPs share (struct tx_port: the arbiter's
    state in C) and the C array of those QPs."""

    def __init__(self, rate_bps: float, slack_ns: int = 0):
        """slack_ns: wire time lost to the engine's delays that the port may
        make up by sending sooner (the pacer's slack)."""
        self.c = TxPort(ps_per_byte=int(8e12 / rate_bps), slack_ns=slack_ns)
        self._members: list = []
        self._array = None              # C reads it: kept alive here

    def join(self, qp: "SendQp") -> None:
        qp.port = self
        qp.c.port = ctypes.pointer(self.c)
        self._members.append(ctypes.pointer(qp.c))
        self._array = (ctypes.POINTER(TxQp) * len(self._members))(*self._members)
        self.c.qps, self.c.n_qps = self._array, len(self._members)


class SendQp:
    """A sending QP: its socket, its frames, its queue of messages, and the
    C side's view of it (counters, PSN, head message, packet log)."""

    def __init__(self, qpn: int, sock, frames: FrameFactory, mtu: int, departure: int, rate: int):
        self.qpn = qpn
        self.sock = sock
        self.frames = frames
        self.queue: deque[Message] = deque()
        self.c = TxQp(fd=sock.fileno(), mtu=mtu, departure=ctypes.cast(departure, u64p),
                      rate=ctypes.cast(rate, u64p))
        self.credit: PortCredit | None = None
        self.port: NicPort | None = None          # the NIC port it shares, if any
        self._pause = None
        self.head: Message | None = None
        self.unacked: deque[Message] = deque()     # sent whole, not acknowledged yet
        self.rto_ns = 0                           # 0: unreliable (no ACKs expected)
        self.acked_psn = 0
        self.completed = 0                        # messages acknowledged: the last one's MSN
        self.ack_delay_ns = 0                     # added to an ACK's arrival (links without delay)
        self.armed_ns = 0                         # the retransmit timer's start
        self.timeouts = 0
        self.slot = -1                            # its place in the engine's C scheduler
        self._log = np.empty(0, dtype=PACKET_LOG)

    packets = property(lambda self: self.c.packets)
    bytes = property(lambda self: self.c.bytes)
    pauses = property(lambda self: self.c.pauses)          # times a pause held this QP
    send_errors = property(lambda self: self.c.send_errors)
    next_psn = property(lambda self: self.c.next_psn)
    retransmits = property(lambda self: self.c.retransmits)    # packets sent again

    @property
    def reliable(self) -> bool:
        return self.rto_ns > 0

    @property
    def idle(self) -> bool:
        """Nothing to send and nothing waiting for an ACK."""
        return self.head is None and not self.queue and not self.unacked

    @property
    def mtu(self) -> int:
        return self.c.mtu

    @mtu.setter
    def mtu(self, value: int) -> None:
        if self.head is not None or self.unacked:
            raise ValueError("the MTU changes between messages only, all acknowledged")
        self.c.mtu = value

    @property
    def log(self) -> np.ndarray:
        """Per packet sent: PACKET_LOG (send time, wire bytes, BPF rate,
        lateness, time a pause or the credit held it)."""
        return self._log[:self.c.log_len]

    def obey(self, pause_addresses: list[int], credit: PortCredit | None) -> None:
        """Lossless mode: hold while any of these pause-until words is in
        the future, and while the credit towards the last hop is spent."""
        self._pause = word_pointers(pause_addresses)
        self.c.pause, self.c.n_pause = self._pause, len(pause_addresses)
        self.credit = credit
        self.c.credit = ctypes.pointer(credit.c) if credit is not None else None

    def keep_log(self, on: bool) -> None:
        if not on:
            self.c.log = None
        elif not len(self._log):
            self.grow_log()
        else:
            self.c.log = self._log.ctypes.data

    def grow_log(self) -> None:
        log = np.empty(max(LOG_START, 2 * len(self._log)), dtype=PACKET_LOG)
        log[:self.c.log_len] = self._log[:self.c.log_len]
        self._log = log
        self.c.log, self.c.log_cap = log.ctypes.data, len(log)

    def load_head(self) -> None:
        """Give C the head message's frames: first (or only), middle, last."""
        msg = self.head = self.queue[0]
        ops, mtu, length = OPCODES[msg.kind], self.c.mtu, msg.length
        if msg.first_psn < 0:
            msg.first_psn, msg.packets = self.c.next_psn, max(1, -(-length // mtu))
        t = self.frames.template
        if length <= mtu:
            self.c.first = self.c.last = ctypes.pointer(t(ops[0], length, length))
        else:
            self.c.first = ctypes.pointer(t(ops[1], mtu, length))
            self.c.middle = ctypes.pointer(t(ops[2], mtu, 0))
            self.c.last = ctypes.pointer(t(ops[3], length - (length - 1) // mtu * mtu, 0))
        self.c.msg_len, self.c.msg_sent = length, 0

    def finish_head(self) -> Message:
        self.head = None
        return self.queue.popleft()

    def take_ack(self, acked_psn: int) -> list[Message]:
        """The messages an ACK up to (not including) acked_psn completes,
        oldest first: outstanding ones, and after a rewind those that went
        again or wait to (the responder had them; then seek past them)."""
        self.acked_psn = acked_psn
        done = []
        while self.unacked and self.unacked[0].acked_by(acked_psn):
            done.append(self.unacked.popleft())
        while not self.unacked and self.queue and self.queue[0].acked_by(acked_psn):
            done.append(self.queue.popleft())
            self.head = None
        return done

    def seek(self, psn: int) -> None:
        """Send from psn next: the queue's first message becomes the head,
        the packets before psn counted as sent if it holds psn."""
        self.head = None
        self.c.next_psn = psn                 # where a message never loaded starts
        if not self.queue:
            return
        m = self.queue[0]
        self.load_head()
        if m.holds(psn):
            self.c.msg_sent = psn_distance(m.first_psn, psn) * self.c.mtu

    def withdraw_head(self) -> None:
        """Drop the head message, none of whose packets has left."""
        self.queue.popleft()
        self.seek(self.c.next_psn)

    def rewind(self, psn: int) -> None:
        """Go back to psn (go-back-N): the message holding it is resent
        from that packet and every message after it follows again. A psn
        not before the next one to send (a late NAK) changes nothing."""
        if not 0 < psn_distance(psn, self.c.next_psn) < PSN_HALF:
            return
        for i, m in enumerate(self.unacked):
            if m.holds(psn):
                again = [self.unacked.pop() for _ in range(len(self.unacked) - i)]
                self.queue.extendleft(again)          # popped newest first: m ends up first
                break
        self.seek(psn)
